import type { Interceptor } from "@connectrpc/connect";

/**
 * What the client uses of `@opentelemetry/api`: `import * as api from "@opentelemetry/api"`
 * is one.
 */
export interface OpenTelemetryApi {
  context: { active(): unknown };
  propagation: { inject(context: unknown, carrier: Record<string, string>): void };
}

// The name is in a variable so that bundlers leave the import to run time: an app
// without the optional package still builds, and its calls go without trace context.
const OPENTELEMETRY_API = "@opentelemetry/api";
// tracestate only means something next to the traceparent it came with.
const TRACE_HEADERS = ["traceparent", "tracestate"];

/** Loaded once per process: the package, or null when it cannot be imported. */
let found: Promise<OpenTelemetryApi | null> | undefined;

function importApi(): Promise<OpenTelemetryApi | null> {
  found ??= import(/* webpackIgnore: true */ /* @vite-ignore */ OPENTELEMETRY_API).then(
    (api: OpenTelemetryApi) => api,
    () => null,
  );
  return found;
}

/**
 * Adds the active trace context to every call, as the globally registered propagator
 * writes it (W3C `traceparent` and `tracestate` unless configured otherwise). Headers the
 * call already has win; with its own `traceparent`, no `tracestate` is added either.
 * `api`: the OpenTelemetry API to use, else `@opentelemetry/api` imported when present.
 */
export function sendTraceContext(api?: OpenTelemetryApi): Interceptor {
  let known: OpenTelemetryApi | null | undefined = api;
  const ready = api ? Promise.resolve(api) : importApi();
  void ready.then((loaded) => (known = loaded));
  return (next) => async (request) => {
    const otel = known === undefined ? await ready : known;
    if (otel) {
      const carrier: Record<string, string> = {};
      otel.propagation.inject(otel.context.active(), carrier);
      const own = request.header.has("traceparent") ? TRACE_HEADERS : [];
      for (const [key, value] of Object.entries(carrier)) {
        if (!own.includes(key) && !request.header.has(key)) {
          request.header.set(key, value);
        }
      }
    }
    return next(request);
  };
}
