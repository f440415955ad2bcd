export { ContextdClient, DEFAULT_ADDRESS, type ContextdClientOptions, type TokenProvider } from "./client.js";
export { ContextdError, type FieldViolation, type StatusName } from "./errors.js";
export { Code, type CallOptions } from "@connectrpc/connect";
export * from "./gen/contextd/v1/chat_pb.js";
export * from "./gen/contextd/v1/context_pb.js";
export * from "./gen/contextd/v1/memory_pb.js";
export * from "./gen/contextd/v1/prompts_pb.js";
export * from "./gen/contextd/v1/sessions_pb.js";
export * from "./gen/contextd/v1/users_pb.js";
