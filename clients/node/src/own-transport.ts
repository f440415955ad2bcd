import { createContextValues, type Interceptor, type Transport } from "@connectrpc/connect";
import { createMethodUrl, runStreamingCall, runUnaryCall } from "@connectrpc/connect/protocol";

/** Whether the `transport` option is a caller's own Transport rather than a protocol name. */
export function isTransport(transport: unknown): transport is Transport {
  return typeof transport === "object" && transport !== null;
}

/**
 * A caller's own transport with the client's interceptors and deadline around it:
 * Connect gives interceptors only to the transports it creates, so the client runs
 * them here, as those transports do, before handing the call on. The transport's own
 * interceptors run after these. `request.url` is the method's path: the transport
 * alone knows where it sends the call.
 */
export function wrapTransport(
  transport: Transport,
  interceptors: Interceptor[],
  defaultTimeoutMs: number | undefined,
): Transport {
  return {
    unary(method, signal, timeoutMs, header, message, contextValues) {
      const deadline = timeoutMs ?? defaultTimeoutMs;
      return runUnaryCall({
        interceptors,
        signal,
        timeoutMs: deadline,
        req: {
          stream: false,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: createMethodUrl("", method),
          header: new Headers(header),
          contextValues: contextValues ?? createContextValues(),
          message,
        },
        next: (request) =>
          transport.unary(
            method,
            request.signal,
            deadline,
            request.header,
            request.message,
            request.contextValues,
          ),
      });
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      const deadline = timeoutMs ?? defaultTimeoutMs;
      return runStreamingCall({
        interceptors,
        signal,
        timeoutMs: deadline,
        req: {
          stream: true,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: createMethodUrl("", method),
          header: new Headers(header),
          contextValues: contextValues ?? createContextValues(),
          message: input,
        },
        next: (request) =>
          transport.stream(
            method,
            request.signal,
            deadline,
            request.header,
            request.message,
            request.contextValues,
          ),
      });
    },
  };
}
