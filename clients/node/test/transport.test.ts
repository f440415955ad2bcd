import assert from "node:assert/strict";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ChatService, Code, ContextService, ContextdClient, Role } from "../src/index.js";
import { BadRequestSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { collect, connect, rejection, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";

/** A stand-in contextd that shows what arrives on the wire (contextd does not echo
 * request headers), served over HTTP/2 for gRPC and over HTTP/1.1 only for gRPC-Web. */
function standIn(seen: Headers[]) {
  return connectNodeAdapter({
    routes(router) {
      router.service(ContextService, {
        listTokenizers(_request, context) {
          seen.push(context.requestHeader);
          return { defaultTokenizer: "stand-in" };
        },
        countTokens() {
          throw new ConnectError("texts[0] is too long", Code.InvalidArgument, undefined, [
            {
              desc: BadRequestSchema,
              value: { fieldViolations: [{ field: "texts[0]", description: "too long" }] },
            },
          ]);
        },
      });
      router.service(ChatService, {
        async *streamChat(request) {
          for (const word of request.userMessage.split(" ")) {
            yield { event: { case: "textDelta", value: { text: word } } };
          }
        },
      });
    },
  });
}

type Listening = http.Server | http2.Http2Server;

async function listen(server: Listening): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

for (const transport of ["grpc", "grpc-web"] as const) {
  describe(`the ${transport} transport`, () => {
    const seen: Headers[] = [];
    const server =
      transport === "grpc" ? http2.createServer(standIn(seen)) : http.createServer(standIn(seen));
    let client: ContextdClient;
    before(async () => {
      const address = await listen(server);
      client = new ContextdClient(address, {
        transport,
        metadata: { "x-tenant": "acme", "x-origin": "client" },
      });
    });
    after(() => {
      client.close();
      server.close();
    });

    it("speaks its protocol and sends the client's metadata; a call's headers win", async () => {
      const answer = await client.context.listTokenizers({}, { headers: { "x-origin": "call" } });
      assert.equal(answer.defaultTokenizer, "stand-in");
      const headers = seen.at(-1);
      assert.ok(headers);
      const expected = transport === "grpc" ? "application/grpc+proto" : "application/grpc-web+proto";
      assert.equal(headers.get("content-type"), expected);
      assert.equal(headers.get("x-tenant"), "acme");
      assert.equal(headers.get("x-origin"), "call");
      assert.ok(headers.get("grpc-timeout"), "the default deadline is sent");
    });

    it("decodes google.rpc.BadRequest from the status details", async () => {
      const error = await rejection(client.context.countTokens({ texts: ["x"] }), Code.InvalidArgument);
      assert.deepEqual(error.violations, [{ field: "texts[0]", description: "too long" }]);
      assert.equal(error.rawMessage, "texts[0] is too long");
    });

    it("streams server-streaming calls", async () => {
      const events = await collect(client.chat.streamChat({ userMessage: "one two three" }));
      assert.deepEqual(
        events.map((e) => (e.event.case === "textDelta" ? e.event.value.text : e.event.case)),
        ["one", "two", "three"],
      );
    });
  });
}

describe("contextd's gRPC-Web port", { skip: WEB_SKIP }, () => {
  const client = connect({ transport: "grpc-web", address: WEB_ADDRESS });
  after(() => client.close());

  it("answers unary calls", async () => {
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
  });

  it("reports rejected fields and cancels", async () => {
    const error = await rejection(
      client.context.buildMessages({ userMessage: "hello", tokenBudget: -1 }),
      Code.InvalidArgument,
    );
    assert.deepEqual(error.fields, ["token_budget"]);
    await rejection(client.context.listTokenizers({}, { signal: AbortSignal.abort() }), Code.Canceled);
  });
});
