import assert from "node:assert/strict";
import * as http from "node:http";
import { after, describe, it } from "node:test";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { ContextdClient, type Interceptor, type Transport } from "../src/index.js";
import { ADDRESS, AUTH, AUTH_SKIP, collect, connect, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";
import { exerciseServices } from "./services.js";

/** A transport made by the caller, and how the caller closes it. */
interface Made {
  transport: Transport;
  close(): void;
}

/** The caller's transports: Connect and gRPC-Web to a web port, gRPC to the gRPC port. */
const makers: Record<string, (grpcAddress: string, webAddress: string) => Made> = {
  Connect: (_, web) => {
    const agent = new http.Agent({ keepAlive: true });
    const baseUrl = `http://${web}`;
    const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { agent } });
    return { transport, close: () => agent.destroy() };
  },
  "gRPC-Web": (_, web) => {
    const agent = new http.Agent({ keepAlive: true });
    const baseUrl = `http://${web}`;
    const transport = createGrpcWebTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { agent } });
    return { transport, close: () => agent.destroy() };
  },
  gRPC: (grpc) => {
    const sessionManager = new Http2SessionManager(`http://${grpc}`);
    const transport = createGrpcTransport({ baseUrl: `http://${grpc}`, sessionManager });
    return { transport, close: () => sessionManager.abort() };
  },
};

/** Records the headers of every call it sees, then replaces its authorization. */
function recording(seen: { method: string; header: Headers }[], authorization?: string): Interceptor {
  return (next) => (request) => {
    seen.push({ method: request.method.name, header: new Headers(request.header) });
    if (authorization !== undefined) {
      request.header.set("authorization", `Bearer ${authorization}`);
    }
    return next(request);
  };
}

for (const [protocol, make] of Object.entries(makers)) {
  describe(`a ${protocol} transport of the caller's`, { skip: WEB_SKIP }, () => {
    const made = make(ADDRESS, WEB_ADDRESS);
    after(() => made.close());

    it("carries every call, its errors and cancellation", async () => {
      const client = new ContextdClient({ transport: made.transport, timeoutMs: 20_000 });
      assert.equal(client.baseUrl, undefined);
      await exerciseServices(client, `own-${protocol}`);
    });

    it("stays open when the client is closed", async () => {
      const first = new ContextdClient({ transport: made.transport });
      first.close();
      const second = new ContextdClient({ transport: made.transport });
      assert.ok((await second.context.listTokenizers({})).defaultTokenizer);
    });
  });

  describe(
    `credentials and interceptors around a ${protocol} transport of the caller's`,
    { skip: AUTH_SKIP },
    () => {
      const made = make(AUTH.address, AUTH.webAddress);
      after(() => made.close());

      it("sends the client's key, metadata and interceptors through it", async () => {
        const seen: { method: string; header: Headers }[] = [];
        const client = new ContextdClient({
          transport: made.transport,
          apiKey: AUTH.alice,
          metadata: { "x-tenant": "acme" },
          interceptors: [recording(seen)],
        });
        const { session } = await client.sessions.createSession({});
        assert.equal(session?.userId, "alice");
        assert.deepEqual(
          seen.map(({ method, header }) => [method, header.get("authorization"), header.get("x-tenant")]),
          [["CreateSession", `Bearer ${AUTH.alice}`, "acme"]],
        );
      });
    },
  );
}

describe("a caller's transport and an address", () => {
  it("are refused together with a TypeError", () => {
    const { transport, close } = makers["gRPC"]?.(ADDRESS, WEB_ADDRESS) ?? assert.fail();
    try {
      assert.throws(
        () => new ContextdClient(ADDRESS, { transport }),
        (error) => error instanceof TypeError && /not both/.test(error.message),
      );
    } finally {
      close();
    }
  });
});

// The caller's interceptors run after the client's own: they see the bearer token and
// metadata as sent, and a header they set reaches the server.
for (const transport of ["grpc", "grpc-web"] as const) {
  describe(`interceptors of the caller's over ${transport}`, { skip: AUTH_SKIP }, () => {
    const address = transport === "grpc" ? AUTH.address : AUTH.webAddress;
    const clients: ContextdClient[] = [];
    after(() => clients.forEach((client) => client.close()));

    it("see every call, unary and streaming, after the client's own", async () => {
      const seen: { method: string; header: Headers }[] = [];
      const client = connect({
        address,
        transport,
        apiKey: AUTH.alice,
        metadata: { "x-tenant": "acme" },
        interceptors: [recording(seen)],
      });
      clients.push(client);
      const { session } = await client.sessions.createSession({});
      await collect(client.chat.streamChat({ session: { sessionId: session?.id ?? "" }, userMessage: "Hi" }));
      await collect(client.sessions.exportEvents({ sessionId: session?.id ?? "" }));
      assert.deepEqual(
        seen.map(({ method }) => method),
        ["CreateSession", "StreamChat", "ExportEvents"],
      );
      for (const { header } of seen) {
        assert.equal(header.get("authorization"), `Bearer ${AUTH.alice}`);
        assert.equal(header.get("x-tenant"), "acme");
      }
    });

    it("can set a header the server acts on", async () => {
      const seen: { method: string; header: Headers }[] = [];
      const client = connect({ address, transport, interceptors: [recording(seen, AUTH.bob)] });
      clients.push(client);
      const { session } = await client.sessions.createSession({});
      assert.equal(session?.userId, "bob");
      assert.equal(seen.length, 1);
    });
  });
}
