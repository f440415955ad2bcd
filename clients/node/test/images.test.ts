import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { OutputFormat, Role, TurnStatus } from "../src/index.js";
import { collect, connect, newUser, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";

// A 1x1 PNG.
const PIXEL = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

function pngPart() {
  return {
    part: {
      case: "image" as const,
      value: { source: { case: "data" as const, value: PIXEL }, mediaType: "image/png" },
    },
  };
}

function textPart(text: string) {
  return { part: { case: "text" as const, value: text } };
}

// Image parts over both transports: bytes travel as binary over gRPC, as base64 in gRPC-Web.
for (const transport of ["grpc", "grpc-web"] as const) {
  const web = transport === "grpc-web";
  describe(`image parts over ${transport}`, { skip: web && WEB_SKIP }, () => {
    const client = web ? connect({ transport, address: WEB_ADDRESS }) : connect();
    after(() => client.close());

    it("builds an OpenAI payload with image_url parts and counts the images", async () => {
      const built = await client.context.buildMessages({
        history: [
          { role: Role.USER, parts: [pngPart()] },
          { role: Role.ASSISTANT, content: "One black pixel." },
        ],
        userMessageParts: [textPart("And now?"), pngPart()],
        tokenBudget: 4000,
        tokenizer: "cl100k_base",
        outputFormat: OutputFormat.OPENAI,
      });
      assert.equal(built.report?.imageTokens, 255 + 255);
      const payload = JSON.parse(built.payloadJson) as { messages: { content: unknown }[] };
      const url = `data:image/png;base64,${PIXEL.toString("base64")}`;
      assert.deepEqual(payload.messages[0]?.content, [{ type: "image_url", image_url: { url } }]);
      const user = built.messages.at(-1);
      assert.equal(user?.parts[1]?.part.case, "image");
    });

    it("sends a chat turn with an image that the echo provider describes", async () => {
      const events = await collect(
        client.chat.streamChat({
          session: { userId: newUser("images") },
          userMessageParts: [textPart("What is it?"), pngPart()],
        }),
      );
      const last = events.at(-1)?.event;
      assert.equal(last?.case, "turnCompleted");
      assert.equal(last.value.status, TurnStatus.OK);
      assert.ok(last.value.finalText.includes(`[image image/png 1x1, ${PIXEL.length} bytes]`));
    });
  });
}
