// The AI SDK and the OpenAI Agents SDK against contextd's /v1 API on the offline echo
// model: one line of JSON per check on standard output ({name, ...} or {name, error}),
// for tests/openai_http/test_agents_node.py to read.
//
//   node check.mjs BASE_URL API_KEY
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Agent, run, setTracingDisabled, tool as agentTool } from "@openai/agents";
import { OpenAIResponsesModel } from "@openai/agents-openai";
import { generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import { z } from "zod";

const [baseURL, apiKey] = process.argv.slice(2);

async function check(name, body) {
  try {
    process.stdout.write(JSON.stringify({ name, ...(await body()) }) + "\n");
  } catch (error) {
    process.stdout.write(JSON.stringify({ name, error: String(error?.stack ?? error) }) + "\n");
  }
}

const Trip = z.object({
  city: z.string().min(3),
  days: z.number().int().min(2).max(9),
  sights: z.array(z.string()),
});
const weather = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});
const time = tool({
  description: "The time in a time zone.",
  inputSchema: z.object({ zone: z.string() }),
  execute: async ({ zone }) => `noon in ${zone}`,
});

const openai = createOpenAI({ baseURL, apiKey });
const compatible = createOpenAICompatible({
  name: "contextd",
  baseURL,
  apiKey,
  supportsStructuredOutputs: true,
});
const models = {
  responses: openai("echo"), // the provider's default: the Responses API
  chat: openai.chat("echo"),
  compatible: compatible("echo"),
};

for (const [kind, model] of Object.entries(models)) {
  await check(`${kind}.generateText`, async () => {
    const { text, usage, finishReason } = await generateText({ model, prompt: "Hello" });
    return { text, finishReason, inputTokens: usage.inputTokens };
  });
  await check(`${kind}.streamText`, async () => {
    const result = streamText({ model, prompt: "Stream it" });
    let streamed = "";
    for await (const piece of result.textStream) streamed += piece;
    return { streamed, text: await result.text };
  });
  await check(`${kind}.generateObject`, async () => {
    const { object } = await generateObject({ model, schema: Trip, prompt: "Plan a trip" });
    return { object };
  });
  await check(`${kind}.toolLoop`, async () => {
    // The first step must call the tools; then the model answers from their results.
    const result = await generateText({
      model,
      tools: { weather, time },
      prompt: "Weather and time?",
      stopWhen: stepCountIs(5),
      prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "auto" }),
    });
    return {
      steps: result.steps.length,
      called: result.steps[0].toolCalls.map((c) => c.toolName).sort(),
      results: result.steps[0].toolResults.map((r) => r.output).sort(),
      text: result.text,
    };
  });
}

setTracingDisabled(true);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
await check("agents.run", async () => {
  const calls = [];
  const lookUp = agentTool({
    name: "look_up",
    description: "Look a word up.",
    parameters: z.object({ word: z.string() }),
    execute: async ({ word }) => {
      calls.push("look_up");
      return `${word}: a greeting`;
    },
  });
  const translate = agentTool({
    name: "translate",
    description: "Translate a word.",
    parameters: z.object({ word: z.string(), language: z.string() }),
    execute: async ({ word, language }) => {
      calls.push("translate");
      return `${word} in ${language}`;
    },
  });
  const agent = new Agent({
    name: "Linguist",
    instructions: "Use both tools, then answer.",
    model: new OpenAIResponsesModel(client, "echo"),
    tools: [lookUp, translate],
    // Required on the first turn; the SDK sets it back to auto once a tool ran.
    modelSettings: { toolChoice: "required" },
  });
  const result = await run(agent, "What does hello mean in French?");
  return { calls: calls.sort(), finalOutput: result.finalOutput };
});
