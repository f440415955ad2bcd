import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { after, describe, it } from "node:test";
import { Code, ConnectError, ContextdClient, ContextdError, Role } from "../src/index.js";
import { BadRequestSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { collect, connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

describe("errors", () => {
  it("INVALID_ARGUMENT names every rejected field", async () => {
    const error = await rejection(
      client.context.buildMessages({
        systemPrompts: ["sys"],
        history: [
          { role: Role.SYSTEM, content: "belongs in the system prompt" },
          { role: Role.ASSISTANT, toolCalls: [{ id: "c1", name: "no spaces allowed", arguments: "{}" }] },
        ],
        userMessage: "hello",
        tokenBudget: 0,
      }),
      Code.InvalidArgument,
    );
    assert.equal(error.codeName, "INVALID_ARGUMENT");
    assert.ok(error instanceof Error);
    // Connect knows its errors by this name: a ContextdError is one of them.
    assert.equal(error.name, "ConnectError");
    assert.deepEqual(error.fields.sort(), [
      "history[0].role",
      "history[1].tool_calls[0].name",
      "token_budget",
    ]);
    assert.ok(error.violations.every((v) => v.description.length > 0));
    assert.equal(error.message, `INVALID_ARGUMENT: ${error.rawMessage}`);
  });

  it("is a ConnectError with the real code, metadata and details", async () => {
    const error = await rejection(
      client.context.buildMessages({ userMessage: "hello", tokenBudget: -1 }),
      Code.InvalidArgument,
    );
    assert.ok(error instanceof ConnectError);
    assert.equal(ConnectError.from(error), error);
    assert.equal(ConnectError.from(error).code, Code.InvalidArgument);
    assert.equal(error.rawMessage, error.message.replace("INVALID_ARGUMENT: ", ""));
    assert.equal(error.metadata.get("grpc-status"), String(Code.InvalidArgument));
    const [badRequest] = error.findDetails(BadRequestSchema);
    assert.deepEqual(
      badRequest?.fieldViolations.map((v) => v.field),
      ["token_budget"],
    );
    assert.ok(error.cause instanceof ConnectError && !(error.cause instanceof ContextdError));
  });

  it("ContextdError.from turns any error into one, as ConnectError.from does", () => {
    const plain = new ConnectError("gone", Code.NotFound, { "x-trace": "t1" });
    const converted = ContextdError.from(plain);
    assert.ok(converted instanceof ContextdError && converted instanceof ConnectError);
    assert.equal(converted.codeName, "NOT_FOUND");
    assert.equal(converted.message, "NOT_FOUND: gone");
    assert.equal(converted.metadata.get("x-trace"), "t1");
    assert.equal(ContextdError.from(converted), converted);
    assert.equal(ContextdError.from(new Error("boom"), Code.Internal).code, Code.Internal);
    assert.equal(ContextdError.from("text").codeName, "UNKNOWN");
    assert.ok(!(new Error("x") instanceof ContextdError));
  });

  it("StreamChat rejects a bad request before the turn starts", async () => {
    const events: unknown[] = [];
    const error = await rejection(
      (async () => {
        for await (const event of client.chat.streamChat({ session: { userId: newUser("bad-chat") } })) {
          events.push(event);
        }
      })(),
      Code.InvalidArgument,
    );
    assert.deepEqual(events, []);
    assert.deepEqual(error.fields, ["user_message"]);
  });

  it("NOT_FOUND for an unknown session, message or memory", async () => {
    const user = newUser("missing");
    const unknown = randomUUID();
    const session = await rejection(
      client.sessions.getSession({ userId: user, sessionId: unknown }),
      Code.NotFound,
    );
    assert.equal(session.codeName, "NOT_FOUND");
    assert.deepEqual(session.violations, []);
    await rejection(client.context.collect({ userId: user, messageId: "999999999" }), Code.NotFound);
    await rejection(client.memory.deleteMemory({ userId: user, memoryId: unknown }), Code.NotFound);
    await rejection(
      collect(client.chat.streamChat({ session: { userId: user, sessionId: unknown }, userMessage: "hi" })),
      Code.NotFound,
    );
  });

  it("NOT_FOUND for another user's session, as for a missing one", async () => {
    const owner = newUser("owner");
    const { session } = await client.sessions.createSession({ userId: owner });
    const error = await rejection(
      client.sessions.listMessages({ userId: newUser("intruder"), sessionId: session?.id ?? "" }),
      Code.NotFound,
    );
    assert.equal(error.codeName, "NOT_FOUND");
  });

  it("DEADLINE_EXCEEDED when the client's deadline passes mid-stream", async () => {
    const hurried = connect({ timeoutMs: 300 });
    try {
      const long = Array.from({ length: 40_000 }, (_, i) => `word${i}`).join(" ");
      const stream = hurried.chat.streamChat({
        session: { userId: newUser("deadline") },
        userMessage: long,
        tokenizer: "estimate",
      });
      const error = await rejection(collect(stream), Code.DeadlineExceeded);
      assert.equal(error.codeName, "DEADLINE_EXCEEDED");
    } finally {
      hurried.close();
    }
  });

  it("CANCELLED for a call whose signal was aborted before it started", async () => {
    const error = await rejection(
      client.context.listTokenizers({}, { signal: AbortSignal.abort() }),
      Code.Canceled,
    );
    assert.equal(error.codeName, "CANCELLED");
  });

  it("UNAVAILABLE when nothing listens at the address", async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
      });
    });
    const nowhere = new ContextdClient(`127.0.0.1:${port}`, { timeoutMs: 5_000 });
    try {
      const error = await rejection(nowhere.context.listTokenizers({}), Code.Unavailable);
      assert.ok(error instanceof ContextdError);
    } finally {
      nowhere.close();
    }
  });
});
