import type { DescService } from "@bufbuild/protobuf";
import { Code, createClient, type CallOptions, type Client, type Transport } from "@connectrpc/connect";
import { ChatService } from "./gen/contextd/v1/chat_pb.js";
import { ContextService } from "./gen/contextd/v1/context_pb.js";
import { MemoryService } from "./gen/contextd/v1/memory_pb.js";
import { PromptService } from "./gen/contextd/v1/prompts_pb.js";
import { SessionService } from "./gen/contextd/v1/sessions_pb.js";
import { UserService } from "./gen/contextd/v1/users_pb.js";
import { callError, type Interruption } from "./errors.js";

/**
 * contextd's services over one transport, for the Node and the browser client alike.
 * One property per service; every unary RPC returns a promise and every
 * server-streaming RPC an async iterable. Each method takes the request (a plain
 * object) and optional call options: `signal` (an AbortSignal that cancels the call),
 * `timeoutMs` (this call's deadline), `headers`. Every failure is thrown as a
 * {@link ContextdError}.
 */
export abstract class ContextdServices {
  readonly context: Client<typeof ContextService>;
  readonly chat: Client<typeof ChatService>;
  readonly sessions: Client<typeof SessionService>;
  readonly memory: Client<typeof MemoryService>;
  readonly prompts: Client<typeof PromptService>;
  readonly users: Client<typeof UserService>;

  /** `defaultTimeoutMs`: the deadline the transport gives a call that sets none. */
  protected constructor(transport: Transport, defaultTimeoutMs: number | undefined) {
    this.context = mapErrors(ContextService, transport, defaultTimeoutMs);
    this.chat = mapErrors(ChatService, transport, defaultTimeoutMs);
    this.sessions = mapErrors(SessionService, transport, defaultTimeoutMs);
    this.memory = mapErrors(MemoryService, transport, defaultTimeoutMs);
    this.prompts = mapErrors(PromptService, transport, defaultTimeoutMs);
    this.users = mapErrors(UserService, transport, defaultTimeoutMs);
  }

  /** Closes the client's connections, if it made any. */
  abstract close(): void;
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
        throw callError(error, watch());
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
    throw callError(error, interrupted());
  }
}
