import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code, ContextdError, ExportFormat, TurnStatus, type StreamChatResponse } from "../src/index.js";
import { collect, connect, eventually, newUser, rejection, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";

function textOf(events: StreamChatResponse[]): string {
  return events.map((e) => (e.event.case === "textDelta" ? e.event.value.text : "")).join("");
}

function completed(events: StreamChatResponse[]) {
  const last = events.at(-1)?.event;
  assert.equal(last?.case, "turnCompleted");
  return last.value;
}

// Chat turns over both transports: gRPC-Web must carry streaming and cancellation too.
for (const transport of ["grpc", "grpc-web"] as const) {
  const web = transport === "grpc-web";
  describe(`ChatService.streamChat over ${transport}`, { skip: web && WEB_SKIP }, () => {
    const client = web ? connect({ transport, address: WEB_ADDRESS }) : connect();
    after(() => client.close());

    it("streams a turn of the echo provider in order and stores it", async () => {
      const user = newUser("chat");
      const first = await collect(
        client.chat.streamChat({ session: { userId: user }, userMessage: "Hello there" }),
      );

      const kinds = first.map((e) => e.event.case);
      const deltas = kinds.filter((kind) => kind === "textDelta").length;
      assert.ok(deltas > 1, `one delta per few words, got ${deltas}`);
      assert.deepEqual(kinds, [
        "turnStarted",
        ...Array<string>(deltas).fill("textDelta"),
        "usage",
        "turnCompleted",
      ]);
      const started = first[0]?.event;
      assert.equal(started?.case, "turnStarted");
      assert.ok(started.value.sessionId);
      assert.equal(started.value.turnIndex, 1);
      assert.equal(started.value.provider, "echo");
      assert.ok(started.value.userMessageId);
      assert.ok(started.value.context);
      const done = completed(first);
      assert.equal(done.status, TurnStatus.OK);
      assert.equal(textOf(first), done.finalText);
      assert.match(done.finalText, /^echo: I received 2 messages .*Your last message was: “Hello there”$/);
      assert.ok(done.turnUsage && done.turnUsage.completionTokens > 0);

      const sessionId = started.value.sessionId;
      const second = await collect(
        client.chat.streamChat({ session: { userId: user, sessionId }, userMessage: "And again" }),
      );
      assert.equal(second[0]?.event.case === "turnStarted" && second[0].event.value.turnIndex, 2);
      const again = completed(second);
      assert.match(again.finalText, /I received 4 messages/);
      assert.equal(
        again.sessionUsage?.completionTokens,
        (done.turnUsage?.completionTokens ?? 0) + (again.turnUsage?.completionTokens ?? 0),
      );

      const stored = await client.sessions.listMessages({ userId: user, sessionId });
      assert.deepEqual(
        stored.messages.map((m) => [m.message?.content, m.turnIndex, m.status]),
        [
          ["Hello there", 1, ""],
          [done.finalText, 1, ""],
          ["And again", 2, ""],
          [again.finalText, 2, ""],
        ],
      );
      assert.equal(stored.messages[1]?.message?.id, done.assistantMessageId);
    });

    it("ends with CANCELLED when aborted mid-stream, and the partial answer is stored", async () => {
      const user = newUser("cancel");
      // The echo provider quotes the message back a few words per delta: thousands of deltas.
      const long = Array.from({ length: 40_000 }, (_, i) => `word${i}`).join(" ");
      const controller = new AbortController();
      const received: StreamChatResponse[] = [];
      const stream = client.chat.streamChat(
        { session: { userId: user }, userMessage: long, tokenizer: "estimate" },
        { signal: controller.signal },
      );
      let caught: unknown;
      try {
        for await (const event of stream) {
          received.push(event);
          if (event.event.case === "textDelta") {
            controller.abort();
          }
        }
      } catch (error) {
        caught = error;
      }
      assert.ok(caught instanceof ContextdError, `ended without a ContextdError: ${String(caught)}`);
      assert.equal(caught.code, Code.Canceled);
      assert.equal(caught.codeName, "CANCELLED");
      assert.deepEqual(
        received.map((e) => e.event.case),
        ["turnStarted", "textDelta"],
      );

      const started = received[0]?.event;
      assert.equal(started?.case, "turnStarted");
      const sessionId = started.value.sessionId;
      const stored = await eventually(async () => {
        const { messages } = await client.sessions.listMessages({ userId: user, sessionId });
        return messages.length === 2 ? messages : undefined;
      });
      const [question, partial] = stored;
      assert.equal(question?.message?.content, long);
      assert.equal(question?.status, "");
      assert.equal(partial?.status, "cancelled");
      const text = partial?.message?.content ?? "";
      assert.ok(text.startsWith(textOf(received)), "the stored answer starts with what was streamed");
      assert.ok(text.length < long.length, `the whole answer was stored (${text.length} characters)`);

      const log = await eventually(async () => {
        const events = await collect(client.sessions.exportEvents({ userId: user, sessionId }));
        return events.at(-1)?.type === "turn_end" ? events : undefined;
      });
      assert.equal(JSON.parse(log.at(-1)?.json ?? "{}").meta?.status, "cancelled");
    });
  });
}

describe("SessionService.exportEvents", () => {
  const client = connect();
  after(() => client.close());

  it("streams the session's event log oldest first, and resumes after a count", async () => {
    const user = newUser("events");
    const turn = await collect(client.chat.streamChat({ session: { userId: user }, userMessage: "Log me" }));
    const started = turn[0]?.event;
    assert.equal(started?.case, "turnStarted");
    const sessionId = started.value.sessionId;
    const finalText = completed(turn).finalText;

    const events = await collect(client.sessions.exportEvents({ userId: user, sessionId }));
    assert.deepEqual(
      events.map((e) => e.type),
      ["session_start", "turn_start", "assistant", "final", "turn_end"],
    );
    const lines = events.map((e) => JSON.parse(e.json) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((line) => [line["type"], line["session_id"]]),
      events.map((e) => [e.type, sessionId]),
    );
    assert.equal(lines[1]?.["content"], "Log me");
    assert.equal(lines[3]?.["content"], finalText);

    const rest = await collect(client.sessions.exportEvents({ userId: user, sessionId, after: 3 }));
    assert.deepEqual(
      rest.map((e) => e.json),
      events.slice(3).map((e) => e.json),
    );
  });

  it("gives the XML history with format XML", async () => {
    const user = newUser("xml");
    const turn = await collect(
      client.chat.streamChat({ session: { userId: user }, userMessage: "Tom & Jerry <3" }),
    );
    const started = turn[0]?.event;
    assert.equal(started?.case, "turnStarted");
    const pieces = await collect(
      client.sessions.exportEvents({
        userId: user,
        sessionId: started.value.sessionId,
        format: ExportFormat.XML,
      }),
    );
    const xml = pieces.map((p) => p.xml).join("");
    assert.ok(xml.startsWith("<?xml"), xml);
    assert.ok(xml.includes("Tom &amp; Jerry &lt;3"), xml);
    assert.ok(pieces.every((p) => p.json === ""));
  });
});

describe("SessionService.endSession", () => {
  const client = connect();
  after(() => client.close());

  it("writes session_end once with the client's mode; a later turn opens the session again", async () => {
    const user = newUser("end");
    const first = await collect(
      client.chat.streamChat({ session: { userId: user }, userMessage: "Hello", mode: "taskpane" }),
    );
    const started = first[0]?.event;
    assert.equal(started?.case, "turnStarted");
    const sessionId = started.value.sessionId;

    assert.equal(
      (await client.sessions.endSession({ userId: user, sessionId, mode: "taskpane" })).ended,
      true,
    );
    assert.equal((await client.sessions.endSession({ userId: user, sessionId })).ended, false);
    await collect(client.chat.streamChat({ session: { userId: user, sessionId }, userMessage: "Again" }));

    const events = await collect(client.sessions.exportEvents({ userId: user, sessionId }));
    const types = events.map((e) => e.type);
    assert.deepEqual(
      types.filter((t) => t.startsWith("session_")),
      ["session_start", "session_end", "session_start"],
    );
    const modes = events
      .filter((e) => e.type.startsWith("session_"))
      .map((e) => (JSON.parse(e.json) as { meta: { mode: string } }).meta.mode);
    assert.deepEqual(modes, ["taskpane", "taskpane", "session"]);

    await rejection(client.sessions.endSession({ userId: "someone-else", sessionId }), Code.NotFound);
    await rejection(
      client.sessions.endSession({ userId: user, sessionId: "no-such-session" }),
      Code.NotFound,
    );
  });
});
