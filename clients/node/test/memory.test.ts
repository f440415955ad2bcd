import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
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
