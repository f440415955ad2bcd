// The official `openai` Node package against contextd's /v1 API: one line of JSON per
// check on standard output, for tests/openai_http/test_node_sdk.py to read.
//
//   node check.mjs BASE_URL API_KEY USER
import OpenAI from "openai";

const [baseURL, apiKey, user] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const model = (await client.models.list()).data[0].id;

function report(name, value) {
  process.stdout.write(JSON.stringify({ name, ...value }) + "\n");
}

report("models", { model });

// A whole answer, inline.
const whole = await client.chat.completions.create({
  model,
  messages: [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Hello from Node" },
  ],
  user,
});
report("whole", {
  content: whole.choices[0].message.content,
  finish: whole.choices[0].finish_reason,
  usage: whole.usage,
  mode: whole.contextd.mode,
});

// A stream with usage, in a new session.
const { data: stream, response } = await client.chat.completions
  .create({
    model,
    messages: [{ role: "user", content: "Stream to Node" }],
    user,
    stream: true,
    stream_options: { include_usage: true },
  }, { headers: { "X-Contextd-Session": "new" } })
  .withResponse();
const sessionId = response.headers.get("x-contextd-session-id");
let text = "";
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  if (chunk.choices.length) text += chunk.choices[0].delta.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
report("stream", { text, usage, chunks, sessionId });

// Host tools in that session: the call, then its result.
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
];
const asked = await client.chat.completions.create(
  { model, messages: [{ role: "user", content: "weather in Paris?" }], user, tools },
  { headers: { "X-Contextd-Session": sessionId } },
);
const call = asked.choices[0].message.tool_calls[0];
report("tool_call", { finish: asked.choices[0].finish_reason, tool: call.function.name, id: call.id });
const answered = await client.chat.completions.create(
  {
    model,
    messages: [{ role: "tool", tool_call_id: call.id, content: "rainy" }],
    user,
    tools,
    metadata: { contextd_session: sessionId },
  },
);
report("tool_result", {
  content: answered.choices[0].message.content,
  turn: answered.contextd.turn_index,
});

// A refused request: the package's own error class and fields.
try {
  await client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }], user, n: 3 });
  report("refused", { thrown: false });
} catch (error) {
  report("refused", {
    thrown: error instanceof OpenAI.BadRequestError,
    status: error.status,
    param: error.param,
    code: error.code,
  });
}
