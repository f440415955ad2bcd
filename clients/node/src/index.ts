export { ContextdClient, DEFAULT_ADDRESS, type ContextdClientOptions } from "./client.js";
export type { ContextdServices } from "./services.js";
export type { CallSettings, TokenProvider } from "./settings.js";
export type { OpenTelemetryApi } from "./trace.js";
export { ContextdError, type FieldViolation, type StatusName } from "./errors.js";
export { Code, ConnectError, type CallOptions, type Interceptor, type Transport } from "@connectrpc/connect";
export * from "./messages.js";
