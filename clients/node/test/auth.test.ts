import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code, ContextdClient, ContextdError, type TokenProvider } from "../src/index.js";
import { AUTH, AUTH_SKIP, collect, rejection } from "./helpers.js";

/** Looks like a key (id prefix and all) but was never issued. */
const UNKNOWN_KEY = `ctxd_000000000000_${"x".repeat(43)}`;

/** A token provider handing out the next token on every call, counting the calls. */
function rotating(...tokens: string[]): TokenProvider & { calls: number } {
  const provider = Object.assign(
    async () => {
      const token = tokens[Math.min(provider.calls, tokens.length - 1)] ?? "";
      provider.calls += 1;
      return token;
    },
    { calls: 0 },
  );
  return provider;
}

// Credentials over both transports, against a server started with --auth api-key.
for (const transport of ["grpc", "grpc-web"] as const) {
  describe(`credentials over ${transport}`, { skip: AUTH_SKIP }, () => {
    const address = transport === "grpc" ? AUTH.address : AUTH.webAddress;
    const clients: ContextdClient[] = [];
    function connect(options: { apiKey?: string; token?: TokenProvider } = {}): ContextdClient {
      const client = new ContextdClient(address, { transport, timeoutMs: 20_000, ...options });
      clients.push(client);
      return client;
    }
    after(() => clients.forEach((client) => client.close()));

    it("an API key makes the key's user the caller, on unary and streaming calls", async () => {
      const client = connect({ apiKey: AUTH.alice });
      const { session } = await client.sessions.createSession({});
      assert.equal(session?.userId, "alice");
      const events = await collect(
        client.chat.streamChat({ session: { sessionId: session.id }, userMessage: "Hi" }),
      );
      assert.equal(events.at(-1)?.event.case, "turnCompleted");
      const log = await collect(client.sessions.exportEvents({ sessionId: session.id }));
      assert.ok(log.length > 0);
      const denied = await rejection(client.sessions.listSessions({ userId: "bob" }), Code.PermissionDenied);
      assert.equal(denied.codeName, "PERMISSION_DENIED");
    });

    for (const [label, apiKey] of [
      ["no key", undefined],
      ["a wrong key", UNKNOWN_KEY],
    ] as const) {
      it(`${label} fails with UNAUTHENTICATED`, async () => {
        const client = connect(apiKey === undefined ? {} : { apiKey });
        const error = await rejection(client.sessions.listSessions({}), Code.Unauthenticated);
        assert.equal(error.codeName, "UNAUTHENTICATED");
        await assert.rejects(
          collect(client.chat.streamChat({ session: {}, userMessage: "Hi" })),
          (thrown) => thrown instanceof ContextdError && thrown.code === Code.Unauthenticated,
        );
      });
    }

    it("asks the token provider before every call, so a refreshed token is used at once", async () => {
      const provider = rotating(AUTH.alice, AUTH.bob);
      const client = connect({ token: provider });
      assert.equal((await client.sessions.createSession({})).session?.userId, "alice");
      assert.equal((await client.sessions.createSession({})).session?.userId, "bob");
      await collect(client.chat.streamChat({ session: {}, userMessage: "Hi" }));
      assert.equal(provider.calls, 3);
    });

    it("a synchronous provider works too, and a call's own authorization header wins", async () => {
      const client = connect({ token: () => UNKNOWN_KEY });
      await rejection(client.sessions.listSessions({}), Code.Unauthenticated);
      const headers = { authorization: `Bearer ${AUTH.bob}` };
      const { session } = await client.sessions.createSession({}, { headers });
      assert.equal(session?.userId, "bob");
    });

    it("a provider that fails fails the call with UNAUTHENTICATED, its error kept", async () => {
      const signInExpired = new Error("the sign-in expired");
      const client = connect({
        token: () => {
          throw signInExpired;
        },
      });
      const error = await rejection(client.sessions.listSessions({}), Code.Unauthenticated);
      assert.match(error.rawMessage, /the sign-in expired/);
      assert.ok(error.cause instanceof Error);
      assert.equal(error.cause.cause, signInExpired);
      const malformed = connect({ token: async () => "Bearer abc" });
      const refused = await rejection(malformed.sessions.listSessions({}), Code.Unauthenticated);
      assert.match(refused.rawMessage, /without 'Bearer '/);
    });
  });
}

describe("credential options", () => {
  for (const [label, options, message] of [
    ["both", { apiKey: "ctxd_a", token: () => "ctxd_a" }, /either apiKey or token/],
    ["an empty key", { apiKey: "" }, /apiKey must be a non-empty string/],
    ["a Bearer prefix", { apiKey: "Bearer ctxd_a" }, /without 'Bearer '/],
    ["a newline", { apiKey: "ctxd_a\n" }, /apiKey/],
    ["a token that is no function", { token: "ctxd_a" as unknown as TokenProvider }, /function/],
    [
      "metadata with authorization",
      { apiKey: "ctxd_a", metadata: { Authorization: "Bearer x" } },
      /authorization/,
    ],
  ] as const) {
    it(`refuses ${label} with a TypeError`, () => {
      assert.throws(
        () => new ContextdClient("127.0.0.1:1", options),
        (error) => {
          assert.ok(error instanceof TypeError);
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }
});
