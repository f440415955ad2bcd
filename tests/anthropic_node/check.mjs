// The official `@anthropic-ai/sdk` Node package and the AI SDK's `@ai-sdk/anthropic`
// against contextd's /v1/messages: one line of JSON per check on standard output, for
// tests/anthropic_http/test_node_sdk.py to read.
//
//   node check.mjs BASE_URL API_KEY USER MODEL
import Anthropic from "@anthropic-ai/sdk";
import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const [baseURL, apiKey, user, model] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });

function report(name, value) {
  process.stdout.write(JSON.stringify({ name, ...value }) + "\n");
}

// A whole answer, inline.
const whole = await client.messages.create({
  model,
  max_tokens: 100,
  system: "You are terse.",
  messages: [{ role: "user", content: "Hello from Node" }],
  metadata: { user_id: user },
});
report("whole", {
  text: whole.content[0].text,
  stop: whole.stop_reason,
  usage: whole.usage,
  mode: whole.contextd.mode,
});

// The stream helper, in a new session.
const stream = client.messages.stream(
  {
    model,
    max_tokens: 100,
    messages: [{ role: "user", content: "Stream to Node" }],
    metadata: { user_id: user },
  },
  { headers: { "X-Contextd-Session": "new" } },
);
let streamed = "";
stream.on("text", (text) => {
  streamed += text;
});
const final = await stream.finalMessage();
report("stream", { text: streamed, final: final.content[0].text, stop: final.stop_reason });

// A host tool, and the stateless loop that sends its result back.
const weather = {
  name: "get_weather",
  description: "The weather in a city.",
  input_schema: { type: "object", properties: { city: { type: "string" } } },
};
const ask = { role: "user", content: "What is the weather?" };
const called = await client.messages.create({
  model,
  max_tokens: 100,
  tools: [weather],
  messages: [ask],
  metadata: { user_id: user },
});
const use = called.content.find((block) => block.type === "tool_use");
const answered = await client.messages.create({
  model,
  max_tokens: 100,
  tools: [weather],
  messages: [
    ask,
    { role: "assistant", content: called.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "rainy" }] },
  ],
  metadata: { user_id: user },
});
report("tools", {
  stop: called.stop_reason,
  tool: use.name,
  input: use.input,
  answer: answered.content[0].text,
});

const counted = await client.messages.countTokens({
  model,
  messages: [ask],
  tools: [weather],
});
report("count", { tokens: counted.input_tokens });

try {
  await client.messages.create({
    model,
    max_tokens: 0,
    messages: [ask],
    metadata: { user_id: user },
  });
  report("refused", { thrown: false });
} catch (error) {
  report("refused", {
    thrown: error instanceof Anthropic.BadRequestError,
    status: error.status,
    type: error.error?.error?.type,
  });
}

// The AI SDK's Anthropic provider with a custom base URL: the user named by a header.
const provider = createAnthropic({
  baseURL: `${baseURL}/v1`,
  apiKey,
  headers: { "X-Contextd-User": user },
});
const generated = await generateText({ model: provider(model), prompt: "Hello from the AI SDK" });
report("generateText", { text: generated.text, finish: generated.finishReason });

const textStream = streamText({ model: provider(model), prompt: "Stream from the AI SDK" });
let aiStreamed = "";
for await (const piece of textStream.textStream) aiStreamed += piece;
report("streamText", { text: aiStreamed, finish: await textStream.finishReason });

const loop = await generateText({
  model: provider(model),
  prompt: "What is the weather in Paris?",
  tools: {
    get_weather: tool({
      description: "The weather in a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => `sunny in ${city}`,
    }),
  },
  stopWhen: stepCountIs(3),
});
report("toolLoop", {
  steps: loop.steps.length,
  calls: loop.steps.flatMap((step) => step.toolCalls.map((call) => call.toolName)),
  text: loop.text,
});
