// The official MCP TypeScript SDKs against contextd's MCP port: one line of JSON per
// client on standard output, for tests/mcp_server/test_node_sdk.py to read.
//
//   node check.mjs URL USER
//
// Clients: "sdk" is @modelcontextprotocol/sdk 1.x (the initialize handshake); "legacy"
// and "2026-07-28" are @modelcontextprotocol/client 2.x, with the handshake and in the
// stateless form.
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, user] = process.argv.slice(2);

function v1() {
  const client = new ClientV1({ name: "contextd-check", version: "1.0.0" });
  const transport = new TransportV1(new URL(url), {
    requestInit: { headers: { "X-Contextd-User": `${user}-sdk` } },
  });
  return { client, transport, name: "sdk" };
}

function v2(mode) {
  const versionNegotiation = { mode: mode === "legacy" ? "legacy" : { pin: mode } };
  const client = new Client({ name: "contextd-check", version: "2.0.0" }, { versionNegotiation });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { "X-Contextd-User": `${user}-${mode}` } },
  });
  return { client, transport, name: mode };
}

async function errorOf(work) {
  try {
    await work();
    return null;
  } catch (error) {
    return { code: error.code, message: String(error.message).slice(0, 300) };
  }
}

async function check({ client, transport, name }) {
  await client.connect(transport);
  const version = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
  const { tools } = await client.listTools();
  const added = await client.callTool({ name: "add_memory", arguments: { content: "Node users like types." } });
  const found = await client.callTool({ name: "search_memories", arguments: { query: "types" } });
  const bad = await client.callTool({ name: "search_memories", arguments: { query: "x", limit: 500 } });
  const missing = await errorOf(() => client.readResource({ uri: "contextd://sessions/424242/messages" }));
  const prompt = await client.getPrompt({ name: "what_do_you_remember", arguments: {} });
  await client.close();
  return {
    client: name,
    version,
    tools: tools.map((t) => ({
      name: t.name,
      title: t.title,
      annotations: t.annotations,
      output: Object.keys(t.outputSchema?.properties ?? {}),
    })),
    added: added.structuredContent,
    found: found.structuredContent,
    bad: { isError: bad.isError, text: bad.content[0].text },
    missing,
    prompt: prompt.messages[0].content.text,
  };
}

for (const setup of [v1(), v2("legacy"), v2("2026-07-28")]) {
  process.stdout.write(JSON.stringify(await check(setup)) + "\n");
}
