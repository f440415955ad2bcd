import * as http from "node:http";
import * as https from "node:https";
import type { DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createClient,
  type CallOptions,
  type Client,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ChatService } from "./gen/contextd/v1/chat_pb.js";
import { ContextService } from "./gen/contextd/v1/context_pb.js";
import { MemoryService } from "./gen/contextd/v1/memory_pb.js";
import { PromptService } from "./gen/contextd/v1/prompts_pb.js";
import { SessionService } from "./gen/contextd/v1/sessions_pb.js";
import { UserService } from "./gen/contextd/v1/users_pb.js";
import { ContextdError, type Interruption } from "./errors.js";

/** The address `contextd serve` listens on by default. */
export const DEFAULT_ADDRESS = "127.0.0.1:50151";

export interface ContextdClientOptions {
  /**
   * `"grpc"` (default): gRPC over HTTP/2. `"grpc-web"`: gRPC-Web over HTTP/1.1, for
   * servers or proxies that speak only HTTP/1.1; the address is then their web port.
   */
  transport?: "grpc" | "grpc-web";
  /** Deadline of every call in milliseconds; `null` for none. Default 30 000. */
  timeoutMs?: number | null;
  /** Headers (gRPC metadata) sent with every call; a call's own `headers` win. */
  metadata?: HeadersInit;
  /**
   * An API key (`contextd keys create`), sent as `authorization: Bearer <key>` with
   * every call. Give this or `token`, not both.
   */
  apiKey?: string;
  /**
   * Returns the current token (or a promise of it), asked before every call so a
   * refreshed token is used at once: for example Office's `getAccessToken`. Sent as
   * `authorization: Bearer <token>`.
   */
  token?: TokenProvider;
}

/** Gives the bearer token of the next call: a string, or a promise of one. */
export type TokenProvider = () => string | Promise<string>;

/**
 * A connection to contextd. One property per service; every unary RPC returns a
 * promise and every server-streaming RPC an async iterable. Each method takes the
 * request (a plain object) and optional call options: `signal` (an AbortSignal that
 * cancels the call), `timeoutMs` (this call's deadline), `headers`. Every failure is
 * thrown as a {@link ContextdError}.
 */
export class ContextdClient {
  readonly baseUrl: string;
  readonly context: Client<typeof ContextService>;
  readonly chat: Client<typeof ChatService>;
  readonly sessions: Client<typeof SessionService>;
  readonly memory: Client<typeof MemoryService>;
  readonly prompts: Client<typeof PromptService>;
  readonly users: Client<typeof UserService>;
  private readonly closeConnection: () => void;

  /** `address` is `host:port` (plain text) or a URL (`https://` for TLS). */
  constructor(address: string = DEFAULT_ADDRESS, options: ContextdClientOptions = {}) {
    this.baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
    const defaultTimeoutMs = options.timeoutMs === undefined ? 30_000 : (options.timeoutMs ?? undefined);
    const interceptors: Interceptor[] = [];
    const credential = tokenSource(options);
    if (credential) {
      interceptors.push(sendBearer(credential));
    }
    if (options.metadata) {
      interceptors.push(sendMetadata(new Headers(options.metadata)));
    }
    const common = { baseUrl: this.baseUrl, defaultTimeoutMs, interceptors };
    let transport: Transport;
    if (options.transport === "grpc-web") {
      const agent = this.baseUrl.startsWith("https:")
        ? new https.Agent({ keepAlive: true })
        : new http.Agent({ keepAlive: true });
      transport = createGrpcWebTransport({ ...common, httpVersion: "1.1", nodeOptions: { agent } });
      this.closeConnection = () => agent.destroy();
    } else {
      const sessionManager = new Http2SessionManager(this.baseUrl);
      transport = createGrpcTransport({ ...common, sessionManager });
      this.closeConnection = () => sessionManager.abort();
    }
    this.context = mapErrors(ContextService, transport, defaultTimeoutMs);
    this.chat = mapErrors(ChatService, transport, defaultTimeoutMs);
    this.sessions = mapErrors(SessionService, transport, defaultTimeoutMs);
    this.memory = mapErrors(MemoryService, transport, defaultTimeoutMs);
    this.prompts = mapErrors(PromptService, transport, defaultTimeoutMs);
    this.users = mapErrors(UserService, transport, defaultTimeoutMs);
  }

  /** Closes the connection; calls still running fail with UNAVAILABLE or CANCELLED. */
  close(): void {
    this.closeConnection();
  }
}

// API keys and JWTs are printable ASCII without spaces; anything else (a "Bearer "
// pasted along, a newline read from a file) is refused here with a precise message
// rather than by the server with a generic UNAUTHENTICATED.
const TOKEN = /^[\x21-\x7e]+$/;

function checkedToken(token: unknown, source: string): string {
  if (typeof token !== "string" || !TOKEN.test(token)) {
    throw new TypeError(
      `${source} must be a non-empty string of printable characters without spaces ` +
        "(the key or token itself, without 'Bearer ')",
    );
  }
  return token;
}

/** Where the calls' bearer token comes from, if anywhere; invalid options throw TypeError. */
function tokenSource(options: ContextdClientOptions): TokenProvider | undefined {
  const { apiKey, token } = options;
  if (apiKey !== undefined && token !== undefined) {
    throw new TypeError("give either apiKey or token, not both");
  }
  if (token !== undefined && typeof token !== "function") {
    throw new TypeError("token must be a function returning the current token");
  }
  if ((apiKey !== undefined || token !== undefined) && new Headers(options.metadata).has("authorization")) {
    throw new TypeError("metadata already has an authorization header; drop it or the apiKey/token");
  }
  if (apiKey !== undefined) {
    const key = checkedToken(apiKey, "apiKey");
    return () => key;
  }
  return token;
}

/**
 * Sets `authorization: Bearer <token>` on every call (a call's own `authorization`
 * header wins), asking the provider each time. A provider that throws or returns a
 * malformed token fails the call with UNAUTHENTICATED (its cause: a ConnectError
 * whose cause is the provider's error).
 */
function sendBearer(token: TokenProvider): Interceptor {
  return (next) => async (request) => {
    if (!request.header.has("authorization")) {
      let current: string;
      try {
        current = checkedToken(await token(), "the token provider's result");
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        // Connect passes a ConnectError through with its code (anything else becomes UNKNOWN).
        throw new ConnectError(
          `no token to send: ${reason}`,
          Code.Unauthenticated,
          undefined,
          undefined,
          error,
        );
      }
      request.header.set("authorization", `Bearer ${current}`);
    }
    return next(request);
  };
}

function sendMetadata(metadata: Headers): Interceptor {
  return (next) => (request) => {
    metadata.forEach((value, key) => {
      if (!request.header.has(key)) {
        request.header.set(key, value);
      }
    });
    return next(request);
  };
}

type AnyCall = (request: unknown, options?: CallOptions) => unknown;

/** A client for `service` whose methods throw ContextdError instead of ConnectError. */
function mapErrors<S extends DescService>(
  service: S,
  transport: Transport,
  defaultTimeoutMs: number | undefined,
): Client<S> {
  const plain = createClient(service, transport) as Record<string, AnyCall>;
  const mapped: Record<string, AnyCall> = {};
  for (const method of service.methods) {
    const call = plain[method.localName];
    if (call === undefined) {
      throw new Error(`no client method for ${service.typeName}.${method.name}`);
    }
    mapped[method.localName] = (request, options) => {
      const watch = watchInterruption(options, defaultTimeoutMs);
      if (method.methodKind === "server_streaming") {
        return rethrowFromStream(call(request, options) as AsyncIterable<unknown>, watch, options?.signal);
      }
      return (call(request, options) as Promise<unknown>).catch((error: unknown) => {
        throw ContextdError.from(error, watch());
      });
    };
  }
  return mapped as Client<S>;
}

/** Starts the clock of a call; the returned function tells whether the caller's signal
 * was aborted or the deadline has passed by now. */
function watchInterruption(
  options: CallOptions | undefined,
  defaultTimeoutMs: number | undefined,
): () => Interruption | undefined {
  const startedAt = performance.now();
  const timeoutMs = options?.timeoutMs ?? defaultTimeoutMs;
  return () => {
    if (options?.signal?.aborted) {
      return { code: Code.Canceled, message: "the call was cancelled" };
    }
    if (timeoutMs !== undefined && performance.now() - startedAt >= timeoutMs) {
      return { code: Code.DeadlineExceeded, message: `the deadline of ${timeoutMs} ms passed` };
    }
    return undefined;
  };
}

/** Yields the stream's messages until the caller aborts (none after that, even ones
 * already received) and rethrows its failure as a ContextdError. */
async function* rethrowFromStream<T>(
  stream: AsyncIterable<T>,
  interrupted: () => Interruption | undefined,
  signal: AbortSignal | undefined,
): AsyncGenerator<T, void, undefined> {
  try {
    for await (const message of stream) {
      signal?.throwIfAborted();
      yield message;
    }
  } catch (error) {
    throw ContextdError.from(error, interrupted());
  }
}
