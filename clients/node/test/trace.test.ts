import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as otel from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { ChatService } from "../src/gen/contextd/v1/chat_pb.js";
import { ContextService } from "../src/gen/contextd/v1/context_pb.js";
import { ContextdClient, type CallSettings } from "../src/index.js";
import { ContextdClient as WebClient } from "../src/web.js";
import { collect } from "./helpers.js";

// The test process uses OpenTelemetry as an app would: a context manager, the W3C
// propagator, a tracer (this file runs in a process of its own under `node --test`).
otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const tracer = new BasicTracerProvider().getTracer("contextd-client-tests");

const OWN_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/** The request headers of every call the in-process server answered. */
const received: Headers[] = [];

function routes(router: ConnectRouter): void {
  router.service(ContextService, {
    listTokenizers(_request, context) {
      received.push(context.requestHeader);
      return {};
    },
  });
  router.service(ChatService, {
    async *streamChat(_request, context) {
      received.push(context.requestHeader);
      yield {};
    },
  });
}

/** A server answering gRPC over HTTP/2 and gRPC-Web over HTTP/1.1, in this process. */
const servers = {
  h2: http2.createServer(connectNodeAdapter({ routes })),
  h1: http.createServer(connectNodeAdapter({ routes })),
};
const address = { grpc: "", web: "" };

async function listen(server: http.Server | http2.Http2Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

before(async () => {
  address.grpc = await listen(servers.h2);
  address.web = await listen(servers.h1);
});
after(() => {
  servers.h2.close();
  servers.h1.close();
});

type Client = ContextdClient | WebClient;
const clients: Record<string, (options?: CallSettings) => Client> = {
  "the Node client": (options = {}) => new ContextdClient(address.grpc, options),
  "the browser client": (options = {}) => new WebClient(address.web, options),
};

/** The headers of a unary and a streaming call, made by `client` inside `run`. */
async function calls(client: Client, headers?: HeadersInit): Promise<Headers[]> {
  received.length = 0;
  try {
    await client.context.listTokenizers({}, { headers });
    await collect(client.chat.streamChat({ session: {}, userMessage: "Hi" }, { headers }));
  } finally {
    client.close();
  }
  assert.equal(received.length, 2);
  return [...received];
}

function traceparentOf(span: otel.Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, "0")}`;
}

async function inSpan<T>(run: (span: otel.Span) => Promise<T>): Promise<[T, otel.Span]> {
  return tracer.startActiveSpan("caller", async (span): Promise<[T, otel.Span]> => {
    try {
      return [await run(span), span];
    } finally {
      span.end();
    }
  });
}

for (const [name, make] of Object.entries(clients)) {
  describe(`trace context from ${name}`, () => {
    it("goes with unary and streaming calls made in a span", async () => {
      const [headers, span] = await inSpan(() => calls(make()));
      for (const header of headers) {
        assert.equal(header.get("traceparent"), traceparentOf(span));
      }
    });

    it("is not sent outside any span", async () => {
      for (const header of await calls(make())) {
        assert.equal(header.get("traceparent"), null);
      }
    });

    it("is not sent with propagateTrace: false", async () => {
      const [headers] = await inSpan(() => calls(make({ propagateTrace: false })));
      for (const header of headers) {
        assert.equal(header.get("traceparent"), null);
      }
    });

    it("comes from the API given as propagateTrace", async () => {
      const [headers, span] = await inSpan(() => calls(make({ propagateTrace: otel })));
      for (const header of headers) {
        assert.equal(header.get("traceparent"), traceparentOf(span));
      }
    });

    it("gives way to the caller's own traceparent, in metadata or a call's headers", async () => {
      const own = { traceparent: OWN_TRACEPARENT };
      const [fromMetadata] = await inSpan(() => calls(make({ metadata: own })));
      const [fromHeaders] = await inSpan(() => calls(make(), own));
      for (const header of [...fromMetadata, ...fromHeaders]) {
        assert.equal(header.get("traceparent"), OWN_TRACEPARENT);
        assert.equal(header.get("tracestate"), null);
      }
    });
  });
}

// Run in a Node process where `@opentelemetry/api` cannot be imported, as in an app
// that does not install it.
const WITHOUT_OPENTELEMETRY = `
import assert from "node:assert/strict";
const { ContextdClient } = await import(process.env.CLIENT_INDEX);
const { ContextdClient: WebClient } = await import(process.env.CLIENT_WEB);
await assert.rejects(import("@opentelemetry/api"));
for (const client of [new ContextdClient(process.env.GRPC), new WebClient(process.env.WEB)]) {
  await client.context.listTokenizers({});
  for await (const _ of client.chat.streamChat({ session: {}, userMessage: "Hi" })) {}
  client.close();
}
console.log("calls done");
`;
const HIDE_PACKAGE = `
export async function resolve(specifier, context, nextResolve) {
  if (specifier === "@opentelemetry/api") {
    throw Object.assign(new Error("Cannot find package " + specifier), { code: "ERR_MODULE_NOT_FOUND" });
  }
  return nextResolve(specifier, context);
}
`;

describe("without @opentelemetry/api", () => {
  it("both clients make their calls, without trace context", async () => {
    const dir = mkdtempSync(join(tmpdir(), "contextd-no-otel-"));
    writeFileSync(join(dir, "hide.mjs"), HIDE_PACKAGE);
    writeFileSync(
      join(dir, "register.mjs"),
      `import { register } from "node:module"; register("./hide.mjs", import.meta.url);`,
    );
    writeFileSync(join(dir, "calls.mjs"), WITHOUT_OPENTELEMETRY);
    received.length = 0;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", pathToFileURL(join(dir, "register.mjs")).href, join(dir, "calls.mjs")],
      {
        env: {
          ...process.env,
          CLIENT_INDEX: new URL("../src/index.js", import.meta.url).href,
          CLIENT_WEB: new URL("../src/web.js", import.meta.url).href,
          GRPC: address.grpc,
          WEB: address.web,
        },
      },
    );
    assert.match(stdout, /calls done/);
    assert.equal(received.length, 4);
    for (const header of received) {
      assert.equal(header.get("traceparent"), null);
    }
  });
});
