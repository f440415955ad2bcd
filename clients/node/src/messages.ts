// contextd's messages, enums and service descriptors, generated from its protos.
export * from "./gen/contextd/v1/chat_pb.js";
export * from "./gen/contextd/v1/context_pb.js";
export * from "./gen/contextd/v1/memory_pb.js";
export * from "./gen/contextd/v1/prompts_pb.js";
export * from "./gen/contextd/v1/sessions_pb.js";
export * from "./gen/contextd/v1/users_pb.js";
