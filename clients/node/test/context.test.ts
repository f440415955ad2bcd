import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code, DropReason, EditKind, OutputFormat, Role } from "../src/index.js";
import { collect, connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

const estimate = "estimate"; // ceil(utf-8 bytes / 4): figures a test can work out by hand

function turns(...contents: string[]) {
  return contents.map((content, i) => ({ role: i % 2 ? Role.ASSISTANT : Role.USER, content }));
}

describe("ContextService.assemblePrompt", () => {
  it("joins the six layers in order and skips blank ones", async () => {
    const all = await client.context.assemblePrompt({
      layers: {
        identity: "<identity>AI</identity>",
        rules: "规则：不写暴力内容",
        skill: "你是续写助手，从光标处继续写作",
        mode: "Mode: agent",
        memory: "用户偏好：简洁风格",
        context: "当前角色：林默正在调查案件",
      },
      tokenizer: estimate,
    });
    const order = ["<identity>", "规则", "续写助手", "Mode: agent", "简洁风格", "林默"];
    const positions = order.map((text) => all.systemPrompt.indexOf(text));
    assert.deepEqual(
      [...positions].sort((a, b) => a - b),
      positions,
    );
    assert.ok(positions.every((p) => p >= 0));
    assert.equal(all.systemPrompt.split("\n\n").length, 6);
    assert.deepEqual(
      all.layers.map((layer) => layer.name),
      ["identity", "rules", "skill", "mode", "memory", "context"],
    );
    assert.equal(all.tokenizer, estimate);

    const blank = await client.context.assemblePrompt({
      layers: { identity: "<identity>AI</identity>", rules: "  ", skill: "", memory: "\n" },
      tokenizer: estimate,
    });
    assert.equal(blank.systemPrompt, "<identity>AI</identity>");
    assert.deepEqual(
      blank.layers.filter((layer) => layer.included).map((layer) => layer.name),
      ["identity"],
    );
    assert.equal(blank.tokens, 6); // 23 bytes
  });
});

describe("ContextService.buildMessages", () => {
  it("keeps system, history and user message in order under a large budget", async () => {
    const built = await client.context.buildMessages({
      systemPrompts: ["<identity>AI</identity>"],
      history: turns("介绍林默", "林默是28岁侦探"),
      userMessage: "他的性格？",
      tokenBudget: 10_000,
      tokenizer: estimate,
    });
    assert.deepEqual(
      built.messages.map((m) => [m.role, m.content]),
      [
        [Role.SYSTEM, "<identity>AI</identity>"],
        [Role.USER, "介绍林默"],
        [Role.ASSISTANT, "林默是28岁侦探"],
        [Role.USER, "他的性格？"],
      ],
    );
    assert.equal(built.report?.historyKept, 2);
  });

  it("drops the oldest history first to fit the budget", async () => {
    const built = await client.context.buildMessages({
      systemPrompts: ["S"],
      history: turns("AAAA", "BBBB", "CCCC", "DDDD"),
      userMessage: "E",
      tokenBudget: 4,
      tokenizer: estimate,
    });
    assert.deepEqual(
      built.messages.map((m) => m.content),
      ["S", "CCCC", "DDDD", "E"],
    );
    const report = built.report;
    assert.ok(report);
    assert.equal(report.totalTokens, 4);
    assert.equal(report.tokenBudget, 4);
    assert.deepEqual(
      report.dropped.map((d) => [d.startIndex, d.count, d.reason]),
      [[0, 2, DropReason.BUDGET]],
    );
  });

  it("answers system and user message for an empty history", async () => {
    const built = await client.context.buildMessages({
      systemPrompts: ["system text"],
      userMessage: "你好",
      tokenBudget: 10_000,
      tokenizer: estimate,
    });
    assert.deepEqual(
      built.messages.map((m) => [m.role, m.content]),
      [
        [Role.SYSTEM, "system text"],
        [Role.USER, "你好"],
      ],
    );
  });

  it("always keeps system and user message, then the newest history that fits", async () => {
    const history = Array.from({ length: 10 }, (_, i) => ({
      role: i % 2 ? Role.ASSISTANT : Role.USER,
      content: `history message ${String(i).padStart(2, "0")}`, // 19 bytes: 5 tokens
    }));
    const request = {
      systemPrompts: ["s".repeat(400)], // 100 tokens
      history,
      userMessage: "u".repeat(200), // 50 tokens
      tokenizer: estimate,
    };
    const fits = await client.context.buildMessages({ ...request, tokenBudget: 160 });
    assert.deepEqual(
      fits.messages.map((m) => m.content),
      [request.systemPrompts[0], "history message 08", "history message 09", request.userMessage],
    );
    assert.equal(fits.messages[0]?.tokens, 100);
    assert.equal(fits.report?.totalTokens, 160);
    assert.equal(fits.report?.requiredOverBudget, false);

    const over = await client.context.buildMessages({ ...request, tokenBudget: 120 });
    assert.deepEqual(
      over.messages.map((m) => m.role),
      [Role.SYSTEM, Role.USER],
    );
    assert.equal(over.report?.requiredOverBudget, true);
    assert.deepEqual(
      over.report?.dropped.map((d) => [d.startIndex, d.count, d.reason]),
      [[0, 10, DropReason.BUDGET]],
    );
  });

  it("returns an OpenAI request body fragment", async () => {
    const built = await client.context.buildMessages({
      systemPrompts: ["Be brief."],
      history: turns("Hi", "Hello!"),
      userMessage: "Bye",
      tokenBudget: 1_000,
      outputFormat: OutputFormat.OPENAI,
    });
    assert.deepEqual(JSON.parse(built.payloadJson), {
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello!" },
        { role: "user", content: "Bye" },
      ],
    });
    assert.equal(built.report?.tokenizer, "cl100k_base"); // the server's default
  });
});

describe("ContextService.countTokens and listTokenizers", () => {
  it("counts texts and messages", async () => {
    const counted = await client.context.countTokens({
      tokenizer: estimate,
      texts: ["", "a", "abcde", "你好"],
      messages: [{ role: Role.USER, content: "他的性格？" }],
    });
    assert.deepEqual(counted.textTokens, [0, 1, 2, 2]);
    assert.deepEqual(counted.messageTokens, [4]);
    assert.equal(counted.totalTokens, 9);
    assert.equal(counted.tokenizer, estimate);
  });

  it("lists the tokenizers with the default one available", async () => {
    const listed = await client.context.listTokenizers({});
    const byName = new Map(listed.tokenizers.map((t) => [t.name, t]));
    assert.equal(listed.defaultTokenizer, "cl100k_base");
    assert.equal(byName.get("cl100k_base")?.available, true);
    assert.equal(byName.get("cl100k_base")?.messageOverhead, 3);
    assert.equal(byName.get(estimate)?.messageOverhead, 0);
  });
});

describe("ContextService.collect", () => {
  it("marks a stored answer collected, remembers it, and takes the mark back", async () => {
    const user = newUser("collect");
    const { session } = await client.sessions.createSession({ userId: user });
    assert.ok(session);
    const { messages } = await client.sessions.appendMessages({
      userId: user,
      sessionId: session.id,
      messages: turns("Where do I keep receipts?", "In the blue folder on the left shelf."),
      turnIndex: 1,
    });
    const answer = messages[1]?.message;
    assert.ok(answer);

    const collected = await client.context.collect({
      userId: user,
      messageId: answer.id,
      remember: true,
    });
    assert.equal(collected.messageId, answer.id);
    assert.equal(collected.isCollected, true);
    assert.ok(collected.memoryId);
    const remembered = await client.memory.listMemories({ userId: user });
    assert.deepEqual(
      remembered.memories.map((m) => [m.id, m.content, m.sourceMessageId]),
      [[collected.memoryId, answer.content, answer.id]],
    );
    const stored = await client.sessions.listMessages({ userId: user, sessionId: session.id });
    assert.deepEqual(
      stored.messages.map((m) => m.isCollected),
      [false, true],
    );

    const taken = await client.context.collect({ userId: user, messageId: answer.id, uncollect: true });
    assert.equal(taken.isCollected, false);
  });
});

describe("ContextService.buildMessages with editing", () => {
  // Three search calls, each answered with 2000 bytes (500 tokens under the estimate).
  const history = [
    { role: Role.USER, content: "find it" },
    ...[0, 1, 2].flatMap((k) => [
      { role: Role.ASSISTANT, toolCalls: [{ id: `c${k}`, name: "search", arguments: "{}" }] },
      { role: Role.TOOL, toolCallId: `c${k}`, content: "word ".repeat(400) },
    ]),
  ];

  it("caps the newest result and clears the older ones, and reports each edit", async () => {
    const built = await client.context.buildMessages({
      history,
      userMessage: "next",
      tokenBudget: 10_000,
      tokenizer: estimate,
      editing: {
        toolResultCapTokens: 100,
        clearTriggerTokens: 1,
        keepToolResults: 1,
        clearAtLeastTokens: 0,
      },
    });
    assert.deepEqual(
      built.report?.edits.map((e) => [e.index, e.kind, e.toolCallId, e.tokensBefore]),
      [
        [2, EditKind.CLEARED, "c0", 500],
        [4, EditKind.CLEARED, "c1", 500],
        [6, EditKind.CAPPED, "c2", 500],
      ],
    );
    assert.equal(
      built.messages[2]?.content,
      "[tool result cleared to save context: search, call c0, 500 tokens]",
    );
    assert.ok((built.messages[6]?.tokens ?? 0) <= 100);
    assert.match(
      built.messages[6]?.content ?? "",
      /\[\.\.\. \d+ tokens \(0 lines\) of this tool result left out \.\.\.\]/,
    );
  });

  it("names a bad setting", async () => {
    const error = await rejection(
      client.context.buildMessages({ userMessage: "x", tokenBudget: 100, editing: { keepToolResults: -1 } }),
      Code.InvalidArgument,
    );
    assert.deepEqual(
      error.violations.map((v) => v.field),
      ["editing.keep_tool_results"],
    );
  });
});

describe("ChatService.streamChat with compaction settings", () => {
  it("names the compaction settings out of range", async () => {
    const error = await rejection(
      collect(
        client.chat.streamChat({
          session: { userId: newUser("compaction") },
          userMessage: "hi",
          compaction: { triggerBudgetShare: 2, keepMessages: 0 },
        }),
      ),
      Code.InvalidArgument,
    );
    assert.deepEqual(error.violations.map((v) => v.field).sort(), [
      "compaction.keep_messages",
      "compaction.trigger_budget_share",
    ]);
  });
});
