// The browser build of the package (`@contextd/client/web`, and `@contextd/client` under
// the "browser" condition): nothing here imports Node's modules.
export { ContextdClient, type ContextdClientOptions } from "./web-client.js";
export type { ContextdServices } from "./services.js";
export type { CallSettings, TokenProvider } from "./settings.js";
export type { OpenTelemetryApi } from "./trace.js";
export { ContextdError, type FieldViolation, type StatusName } from "./errors.js";
export { Code, ConnectError, type CallOptions, type Interceptor, type Transport } from "@connectrpc/connect";
export * from "./messages.js";
