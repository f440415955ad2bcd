import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code, MemoryMode, Role } from "../src/index.js";
import { connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

describe("SessionService", () => {
  it("creates, gets, lists newest first page by page, and deletes sessions", async () => {
    const user = newUser("sessions");
    const created = [];
    for (const title of ["first", "second", "third"]) {
      const { session } = await client.sessions.createSession({
        userId: user,
        title,
        scenario: "excel-formula",
        host: "excel",
        metadata: { workbook: "budget.xlsx" },
      });
      assert.ok(session);
      created.push(session);
    }
    const [first] = created;
    assert.ok(first);
    const got = await client.sessions.getSession({ userId: user, sessionId: first.id });
    assert.equal(got.session?.title, "first");
    assert.equal(got.session?.scenario, "excel-formula");
    assert.equal(got.session?.host, "excel");
    assert.deepEqual(got.session?.metadata, { workbook: "budget.xlsx" });
    assert.equal(got.session?.userId, user);
    assert.ok(got.session?.createTime);

    const page1 = await client.sessions.listSessions({ userId: user, pageSize: 2 });
    assert.ok(page1.nextPageToken);
    const page2 = await client.sessions.listSessions({
      userId: user,
      pageSize: 2,
      pageToken: page1.nextPageToken,
    });
    assert.equal(page2.nextPageToken, "");
    assert.deepEqual(
      [...page1.sessions, ...page2.sessions].map((s) => s.title),
      ["third", "second", "first"],
    );

    await client.sessions.deleteSession({ userId: user, sessionId: first.id });
    await rejection(client.sessions.getSession({ userId: user, sessionId: first.id }), Code.NotFound);
    const left = await client.sessions.listSessions({ userId: user });
    assert.deepEqual(
      left.sessions.map((s) => s.title),
      ["third", "second"],
    );
  });

  it("appends messages in order and lists them page by page", async () => {
    const user = newUser("messages");
    const { session } = await client.sessions.createSession({ userId: user });
    assert.ok(session);
    const appended = await client.sessions.appendMessages({
      userId: user,
      sessionId: session.id,
      turnIndex: 1,
      messages: [
        { role: Role.USER, content: "What is 2 + 2?" },
        {
          role: Role.ASSISTANT,
          toolCalls: [{ id: "call_1", name: "calculator", arguments: '{"expression": "2 + 2"}' }],
        },
        { role: Role.TOOL, toolCallId: "call_1", content: "4" },
        { role: Role.ASSISTANT, content: "2 + 2 = 4." },
      ],
    });
    assert.deepEqual(
      appended.messages.map((m) => [m.seq, m.turnIndex, m.sessionId, m.status]),
      [0, 1, 2, 3].map((seq) => [seq, 1, session.id, ""]),
    );
    assert.equal(new Set(appended.messages.map((m) => m.message?.id)).size, 4);

    const page1 = await client.sessions.listMessages({ userId: user, sessionId: session.id, pageSize: 3 });
    const page2 = await client.sessions.listMessages({
      userId: user,
      sessionId: session.id,
      pageSize: 3,
      pageToken: page1.nextPageToken,
    });
    assert.equal(page2.nextPageToken, "");
    const stored = [...page1.messages, ...page2.messages].map((m) => m.message);
    assert.deepEqual(
      stored.map((m) => [m?.role, m?.content]),
      [
        [Role.USER, "What is 2 + 2?"],
        [Role.ASSISTANT, ""],
        [Role.TOOL, "4"],
        [Role.ASSISTANT, "2 + 2 = 4."],
      ],
    );
    assert.deepEqual(
      stored[1]?.toolCalls.map((c) => [c.id, c.name]),
      [["call_1", "calculator"]],
    );
    assert.equal(stored[2]?.toolCallId, "call_1");
    const again = await client.sessions.getSession({ userId: user, sessionId: session.id });
    assert.equal(again.session?.messageCount, 4);
  });

  it("applies a compression summary in the session's window", async () => {
    const user = newUser("compress");
    const { session } = await client.sessions.createSession({ userId: user });
    assert.ok(session);
    const { messages } = await client.sessions.appendMessages({
      userId: user,
      sessionId: session.id,
      turnIndex: 1,
      messages: ["My cat is called Miso.", "Nice name!", "She is three.", "Lovely."].map((content, i) => ({
        role: i % 2 ? Role.ASSISTANT : Role.USER,
        content,
      })),
    });
    const replaced = messages.slice(0, 2).map((m) => m.message?.id ?? "");
    const { summaryId } = await client.sessions.addCompressionSummary({
      userId: user,
      sessionId: session.id,
      messageIds: replaced,
      startMessageId: replaced[0] ?? "",
      summary: "The user's cat is Miso.",
    });
    assert.ok(summaryId);

    const built = await client.context.buildMessages({
      session: { userId: user, sessionId: session.id, memory: MemoryMode.OFF },
      userMessage: "How old is my cat?",
      tokenBudget: 2_000,
    });
    assert.deepEqual(
      built.messages.slice(1).map((m) => m.content),
      [
        "[Previous conversation summary]\n\nThe user's cat is Miso.",
        "She is three.",
        "Lovely.",
        "How old is my cat?",
      ],
    );
    assert.equal(built.report?.summaryIncluded, true);
  });

  it("shows a session's summary to the user's other sessions", async () => {
    const user = newUser("summary");
    const older = await client.sessions.createSession({ userId: user, title: "Trip planning" });
    const olderId = older.session?.id ?? "";
    await client.sessions.appendMessages({
      userId: user,
      sessionId: olderId,
      turnIndex: 1,
      messages: [{ role: Role.USER, content: "Plan a trip to Lisbon." }],
    });
    await client.sessions.setSessionSummary({
      userId: user,
      sessionId: olderId,
      summary: "Planning a May trip to Lisbon.",
    });
    const current = await client.sessions.createSession({ userId: user });

    const built = await client.context.buildMessages({
      session: { userId: user, sessionId: current.session?.id ?? "", memory: MemoryMode.ON },
      userMessage: "Where was I going?",
      tokenBudget: 4_000,
    });
    assert.match(built.messages[0]?.content ?? "", /Planning a May trip to Lisbon\./);
    const recent = built.report?.contextLayers.find((layer) => layer.name === "recent_sessions");
    assert.equal(recent?.included, true);
    assert.equal(recent?.itemsKept, 1);
  });
});
