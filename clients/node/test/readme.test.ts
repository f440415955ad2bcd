import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { before, describe, it } from "node:test";
import ts from "typescript";
import { ADDRESS, WEB_ADDRESS, WEB_SKIP } from "./helpers.js";

// Every ```ts block of the README is type-checked as the package's users would
// (importing "@contextd/client"), then run against the live server.
const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const examplesDir = join(packageDir, "dist", "readme");
const readme = readFileSync(join(packageDir, "README.md"), "utf8");
const matches = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)];
const blocks = matches.map((match) => match[1] ?? "");
const lines = matches.map((match) => readme.slice(0, match.index).split("\n").length);
const sources = blocks.map((_, i) => join(examplesDir, `example-${i + 1}.ts`));

describe("README examples", () => {
  before(() => {
    rmSync(examplesDir, { recursive: true, force: true });
    mkdirSync(examplesDir, { recursive: true });
    blocks.forEach((code, i) => writeFileSync(sources[i] ?? "", code));
    const config = ts.getParsedCommandLineOfConfigFile(
      join(packageDir, "tsconfig.json"),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (diagnostic) => assert.fail(String(diagnostic.messageText)),
      },
    );
    assert.ok(config);
    const options = { ...config.options, rootDir: examplesDir, outDir: examplesDir, declaration: false };
    const program = ts.createProgram(sources, options);
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    assert.deepEqual(problems, [], "the README's examples do not type-check");
    assert.equal(program.emit().emitSkipped, false);
  });

  it("has examples", () => {
    assert.ok(blocks.length >= 6, `found ${blocks.length} examples`);
  });

  blocks.forEach((code, i) => {
    const web = code.includes("CONTEXTD_WEB_ADDRESS");
    it(`the example at README.md:${lines[i]} runs`, { skip: web && WEB_SKIP }, async () => {
      const script = (sources[i] ?? "").replace(/\.ts$/, ".js");
      const env = { ...process.env, CONTEXTD_ADDRESS: ADDRESS, CONTEXTD_WEB_ADDRESS: WEB_ADDRESS };
      await promisify(execFile)(process.execPath, [script], { env, timeout: 30_000 });
    });
  });
});
