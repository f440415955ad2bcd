import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "../src/index.js";
import { connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

describe("MemoryService", () => {
  it("stores a text once per user, searches Chinese and English, lists and deletes", async () => {
    const user = newUser("memory");
    const coffee = await client.memory.addMemory({ userId: user, content: "我喜欢喝咖啡" });
    assert.equal(coffee.created, true);
    assert.equal(coffee.memory?.userId, user);
    const again = await client.memory.addMemory({ userId: user, content: "  我喜欢喝咖啡 " });
    assert.equal(again.created, false);
    assert.equal(again.memory?.id, coffee.memory?.id);
    await client.memory.addMemory({ userId: user, content: "I live in Lisbon" });
    await client.memory.addMemory({ userId: user, content: "My sister is a nurse" });

    const found = await client.memory.searchMemories({ userId: user, query: "咖啡" });
    assert.deepEqual(
      found.results.map((r) => r.memory?.content),
      ["我喜欢喝咖啡"],
    );
    const [hit] = found.results;
    assert.ok(hit && hit.score > 0 && hit.relevance > 0 && hit.recency > 0 && hit.recency <= 1);
    const english = await client.memory.searchMemories({ userId: user, query: "where do I live", limit: 1 });
    assert.deepEqual(
      english.results.map((r) => r.memory?.content),
      ["I live in Lisbon"],
    );
    const stranger = await client.memory.searchMemories({ userId: newUser("stranger"), query: "咖啡" });
    assert.deepEqual(stranger.results, []);

    const page1 = await client.memory.listMemories({ userId: user, pageSize: 2 });
    const page2 = await client.memory.listMemories({
      userId: user,
      pageSize: 2,
      pageToken: page1.nextPageToken,
    });
    assert.deepEqual(
      [...page1.memories, ...page2.memories].map((m) => m.content),
      ["My sister is a nurse", "I live in Lisbon", "我喜欢喝咖啡"],
    );

    const coffeeId = coffee.memory?.id ?? "";
    await client.memory.deleteMemory({ userId: user, memoryId: coffeeId });
    const left = await client.memory.listMemories({ userId: user });
    assert.equal(left.memories.length, 2);
    await rejection(client.memory.deleteMemory({ userId: user, memoryId: coffeeId }), Code.NotFound);
  });
});

describe("MemoryService: scopes, filters, validity, updates and history", () => {
  it("filters by scope and metadata, supersedes a fact and finds it as of its time", async () => {
    const user = newUser("memory-model");
    const job = await client.memory.addMemory({
      userId: user,
      content: "I work as a nurse",
      metadata: { topic: "work" },
    });
    const word = await client.memory.addMemory({
      userId: user,
      content: "Tables with borders at work",
      scope: { app: "word" },
      expireTime: timestampFromDate(new Date(Date.now() + 86_400_000)),
    });
    assert.equal(word.memory?.scope?.app, "word");
    assert.ok(word.memory?.expireTime && word.memory.validFrom);
    const inWord = await client.memory.listMemories({ userId: user, filter: { app: "word" } });
    assert.deepEqual(
      inWord.memories.map((m) => m.content),
      ["Tables with borders at work"],
    );
    const byTopic = await client.memory.searchMemories({
      userId: user,
      query: "work",
      filter: { metadata: { topic: "work" } },
    });
    assert.deepEqual(
      byTopic.results.map((r) => r.memory?.content),
      ["I work as a nurse"],
    );

    const before = timestampFromDate(new Date());
    const jobId = job.memory?.id ?? "";
    const updated = await client.memory.updateMemory({
      userId: user,
      memoryId: jobId,
      memory: { content: "I work as a teacher" },
      updateMask: { paths: ["content"] },
      supersede: true,
    });
    assert.equal(updated.memory?.id, jobId);
    const now = await client.memory.searchMemories({
      userId: user,
      query: "nurse work",
      filter: { app: "" },
    });
    assert.deepEqual(
      now.results.map((r) => r.memory?.content),
      ["I work as a teacher"],
    );
    const then = await client.memory.searchMemories({
      userId: user,
      query: "nurse",
      filter: { asOf: before },
    });
    assert.deepEqual(
      then.results.map((r) => [r.memory?.content, r.memory?.supersededBy]),
      [["I work as a nurse", jobId]],
    );

    const history = await client.memory.listMemoryHistory({ userId: user, memoryId: jobId });
    assert.deepEqual(
      history.changes.map((c) => [c.action, c.oldContent, c.newContent, c.method]),
      [["update", "I work as a nurse", "I work as a teacher", "api"]],
    );
    assert.equal(history.changes[0]?.replacedMemoryId, then.results[0]?.memory?.id);

    await rejection(
      client.memory.updateMemory({ userId: user, memoryId: jobId, memory: { content: "x" } }),
      Code.InvalidArgument,
    );
    await rejection(
      client.memory.updateMemory({
        userId: newUser("other"),
        memoryId: jobId,
        memory: { content: "mine" },
        updateMask: { paths: ["content"] },
      }),
      Code.NotFound,
    );
  });
});
