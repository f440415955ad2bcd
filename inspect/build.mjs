// Builds the inspector into the Python package (server/contextd/fronts/web/
// inspector_assets/), where it is committed so that installing and running contextd needs no Node.
// `node build.mjs --check` builds into a temporary folder instead and fails when the
// committed files differ: run by `make test`, so CI fails on a stale build.
import { mkdtempSync, readFileSync, readdirSync, rmSync, copyFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";

const SHIPPED = "../server/contextd/fronts/web/inspector_assets";
const check = process.argv.includes("--check");
const out = check ? mkdtempSync(join(tmpdir(), "inspect-")) : SHIPPED;

mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.ts"],
  outfile: join(out, "app.js"),
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("index.html", join(out, "index.html"));
copyFileSync("app.css", join(out, "app.css"));

if (check) {
  const stale = readdirSync(out).filter((name) => {
    try {
      return !readFileSync(join(out, name)).equals(readFileSync(join(SHIPPED, name)));
    } catch {
      return true;
    }
  });
  const extra = readdirSync(SHIPPED).filter((name) => !readdirSync(out).includes(name));
  rmSync(out, { recursive: true, force: true });
  if (stale.length || extra.length) {
    console.error(
      `the committed inspector is stale (${[...stale, ...extra].join(", ")}): ` +
        "run `npm run bundle` in inspect/ and commit server/contextd/fronts/web/inspector_assets/",
    );
    process.exit(1);
  }
}
