import assert from "node:assert/strict";
import { Code, Role, type ContextdServices } from "../src/index.js";
import { collect, newUser, rejection } from "./helpers.js";

/** Runs a unary call, a chat turn, a rejected request and a cancelled call through
 * `client`, whichever transport carries them, checking each answer. */
export async function exerciseServices(client: ContextdServices, label: string): Promise<void> {
  const built = await client.context.buildMessages({
    systemPrompts: ["S"],
    history: ["AAAA", "BBBB", "CCCC", "DDDD"].map((content, i) => ({
      role: i % 2 ? Role.ASSISTANT : Role.USER,
      content,
    })),
    userMessage: "E",
    tokenBudget: 4,
    tokenizer: "estimate",
  });
  assert.deepEqual(
    built.messages.map((m) => m.content),
    ["S", "CCCC", "DDDD", "E"],
  );

  const events = await collect(
    client.chat.streamChat({ session: { userId: newUser(label) }, userMessage: "Hello there" }),
  );
  assert.equal(events[0]?.event.case, "turnStarted");
  assert.equal(events.at(-1)?.event.case, "turnCompleted");

  const invalid = await rejection(
    client.context.buildMessages({ userMessage: "hello", tokenBudget: -1 }),
    Code.InvalidArgument,
  );
  assert.deepEqual(invalid.fields, ["token_budget"]);
  await rejection(client.context.listTokenizers({}, { signal: AbortSignal.abort() }), Code.Canceled);
}
