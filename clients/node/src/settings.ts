import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { sendTraceContext, type OpenTelemetryApi } from "./trace.js";

/** Gives the bearer token of the next call: a string, or a promise of one. */
export type TokenProvider = () => string | Promise<string>;

/** The options every contextd client takes, whatever carries its calls. */
export interface CallSettings {
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
  /**
   * Whether every call carries the active OpenTelemetry trace context (`traceparent`),
   * when `@opentelemetry/api` can be imported (default `true`). Or the API itself
   * (`import * as api from "@opentelemetry/api"`), for a bundled app where the client
   * cannot import it by name. A `traceparent` in `metadata` or the call's `headers` wins.
   */
  propagateTrace?: boolean | OpenTelemetryApi;
  /**
   * Connect interceptors run on every call, in this order, after the client's own
   * (which set the bearer token, `metadata` and the trace context): they see the
   * headers as they are sent and may change them.
   */
  interceptors?: Interceptor[];
}

/** The deadline every call gets unless it gives its own. */
export function defaultTimeout(settings: CallSettings): number | undefined {
  return settings.timeoutMs === undefined ? 30_000 : (settings.timeoutMs ?? undefined);
}

/** The client's interceptors, outermost first: its credential, its metadata, the trace
 * context, the caller's. */
export function interceptorsOf(settings: CallSettings): Interceptor[] {
  const interceptors: Interceptor[] = [];
  const credential = tokenSource(settings);
  if (credential) {
    interceptors.push(sendBearer(credential));
  }
  if (settings.metadata) {
    interceptors.push(sendMetadata(new Headers(settings.metadata)));
  }
  const { propagateTrace = true } = settings;
  if (propagateTrace !== false) {
    interceptors.push(sendTraceContext(propagateTrace === true ? undefined : propagateTrace));
  }
  return [...interceptors, ...(settings.interceptors ?? [])];
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
function tokenSource(options: CallSettings): TokenProvider | undefined {
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
