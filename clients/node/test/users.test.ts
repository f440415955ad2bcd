import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code } from "../src/index.js";
import { connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

describe("UserService", () => {
  it("erases a user's memories and sessions, once, after the confirmation", async () => {
    const user = newUser("erased");
    await client.memory.addMemory({ userId: user, content: "I live in Lisbon" });
    await client.sessions.createSession({ userId: user });

    const refused = await rejection(client.users.deleteUser({ userId: user }), Code.InvalidArgument);
    assert.deepEqual(
      refused.violations.map((v) => v.field),
      ["confirm_user_id"],
    );

    const erased = await client.users.deleteUser({ userId: user, confirmUserId: user });
    assert.equal(erased.memories, 1);
    assert.equal(erased.sessions, 1);
    const again = await client.users.deleteUser({ userId: user, confirmUserId: user });
    assert.equal(again.memories, 0);
    assert.equal(again.sessions, 0);
    assert.deepEqual((await client.memory.listMemories({ userId: user })).memories, []);
  });
});
