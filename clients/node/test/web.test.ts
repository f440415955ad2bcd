import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { build, type Metafile } from "esbuild";
import { Code, ConnectError, ContextdClient, ContextdError } from "../src/web.js";
import { AUTH, AUTH_SKIP, rejection, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";
import { exerciseServices } from "./services.js";

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The module graph esbuild bundles for `import * from specifier` on `platform`, the
 * package's own name resolved through its "exports" as a user's bundler does. */
async function moduleGraph(specifier: string, platform: "browser" | "node"): Promise<Metafile> {
  const { metafile } = await build({
    stdin: { contents: `export * from "${specifier}";`, resolveDir: packageDir },
    absWorkingDir: packageDir,
    bundle: true,
    write: false,
    metafile: true,
    format: "esm",
    platform,
    logLevel: "silent",
  });
  return metafile;
}

function nodeImports(graph: Metafile): string[] {
  const imports = Object.values(graph.inputs).flatMap((input) => input.imports.map((i) => i.path));
  return [...new Set(imports.filter((path) => path.startsWith("node:")))].sort();
}

describe("the browser build", () => {
  for (const [specifier, platform] of [
    ["@contextd/client", "browser"],
    ["@contextd/client/web", "browser"],
    ["@contextd/client/web", "node"],
  ] as const) {
    it(`${specifier} on ${platform} imports no Node module`, async () => {
      const graph = await moduleGraph(specifier, platform);
      const inputs = Object.keys(graph.inputs);
      assert.ok(inputs.includes("dist/src/web.js"), inputs.join("\n"));
      assert.ok(!inputs.includes("dist/src/client.js"), "the Node client is in the graph");
      assert.ok(!inputs.some((path) => path.includes("@connectrpc/connect-node")), inputs.join("\n"));
      assert.deepEqual(nodeImports(graph), []);
    });
  }

  it("is not what Node gets from @contextd/client, which imports Node's modules", async () => {
    const graph = await moduleGraph("@contextd/client", "node");
    assert.ok(Object.keys(graph.inputs).includes("dist/src/client.js"));
    assert.ok(nodeImports(graph).includes("node:http2"));
  });

  it("is the module Node loads for @contextd/client/web", async () => {
    const specifier = "@contextd/client/web"; // resolved at run time, through "exports"
    const loaded = (await import(specifier)) as { ContextdClient: unknown };
    assert.equal(loaded.ContextdClient, ContextdClient);
  });

  it("is in the published package, with every file the exports name", async () => {
    const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: packageDir,
    });
    const [packed] = JSON.parse(stdout) as { files: { path: string }[] }[];
    const files = new Set(packed?.files.map((file) => file.path));
    const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
      exports: object;
    };
    const targets: string[] = JSON.stringify(manifest.exports).match(/\.\/dist\/[^"]+/g) ?? [];
    assert.ok(targets.includes("./dist/src/web.js") && targets.includes("./dist/src/web.d.ts"));
    assert.deepEqual(
      targets.filter((target) => !files.has(target.slice(2))),
      [],
    );
  });

  it("wants an address or a transport", () => {
    assert.throws(() => new ContextdClient(""), TypeError);
  });
});

// Node's fetch stands in for the browser's: the same transports, the same web port.
describe("the browser client over fetch", { skip: WEB_SKIP }, () => {
  for (const protocol of ["grpc-web", "connect"] as const) {
    it(`speaks ${protocol} with contextd's web port`, async () => {
      const client = new ContextdClient(WEB_ADDRESS, { transport: protocol, timeoutMs: 20_000 });
      assert.equal(client.baseUrl, `http://${WEB_ADDRESS}`);
      await exerciseServices(client, `web-${protocol}`);
      const error = await rejection(
        client.sessions.getSession({ userId: "web", sessionId: "none" }),
        Code.NotFound,
      );
      assert.ok(error instanceof ConnectError && ConnectError.from(error).code === Code.NotFound);
      client.close();
    });
  }

  for (const [protocol, make] of [
    ["gRPC-Web", createGrpcWebTransport],
    ["Connect", createConnectTransport],
  ] as const) {
    it(`takes a ${protocol} transport of connect-web's`, async () => {
      const transport = make({ baseUrl: `http://${WEB_ADDRESS}` });
      const client = new ContextdClient({ transport, timeoutMs: 20_000 });
      await exerciseServices(client, `web-own-${protocol}`);
    });
  }
});

describe("the browser client's credentials", { skip: AUTH_SKIP }, () => {
  it("sends the API key or the token provider's token", async () => {
    const withKey = new ContextdClient(AUTH.webAddress, { apiKey: AUTH.alice });
    assert.equal((await withKey.sessions.createSession({})).session?.userId, "alice");
    const withToken = new ContextdClient(AUTH.webAddress, {
      transport: "connect",
      token: async () => AUTH.bob,
    });
    assert.equal((await withToken.sessions.createSession({})).session?.userId, "bob");
    const without = new ContextdClient(AUTH.webAddress);
    const error = await rejection(without.sessions.listSessions({}), Code.Unauthenticated);
    assert.ok(error instanceof ContextdError);
  });
});
