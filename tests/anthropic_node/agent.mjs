// The Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`, which runs the Claude Code
// program it bundles) against contextd's /v1/messages: one prompt, one tool of the
// host's own (an in-process MCP tool, the only tool offered). One line of JSON on
// standard output, for tests/anthropic_http/test_node_sdk.py to read.
//
//   node agent.mjs BASE_URL API_KEY USER MODEL HOME
import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const [baseURL, apiKey, user, model, home] = process.argv.slice(2);
const calls = [];
const weather = tool(
  "get_weather",
  "The weather in a city.",
  { city: z.string() },
  async ({ city }) => {
    calls.push(city);
    return { content: [{ type: "text", text: `sunny in ${city}` }] };
  },
);
const options = {
  model,
  cwd: home,
  tools: [], // none of Claude Code's own
  mcpServers: { weather: createSdkMcpServer({ name: "weather", tools: [weather] }) },
  allowedTools: ["mcp__weather__get_weather"],
  settingSources: [],
  persistSession: false,
  maxTurns: 3,
  // The program reads its endpoint and key from here, and nothing else of ours.
  env: {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: baseURL,
    ANTHROPIC_API_KEY: apiKey,
    ANTHROPIC_CUSTOM_HEADERS: `X-Contextd-User: ${user}`,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  },
};

const seen = [];
let result = null;
for await (const message of query({ prompt: "What is the weather in Paris?", options })) {
  if (message.type === "assistant") {
    for (const block of message.message.content) {
      seen.push(block.type === "tool_use" ? `tool_use:${block.name}` : block.type);
    }
  }
  if (message.type === "result") {
    result = { subtype: message.subtype, text: message.result, turns: message.num_turns };
  }
}
process.stdout.write(JSON.stringify({ name: "agent", calls, seen, result }) + "\n");
