// Bundles the task pane script for the browser and the Playwright drivers for Node (the
// task pane's, and the context inspector's of tests/web/test_inspect.py).
import { build } from "esbuild";

await build({
  entryPoints: ["src/taskpane.ts"],
  outfile: "dist/taskpane.js",
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  sourcemap: "inline",
});

for (const driver of ["drive", "inspect"]) {
  await build({
    entryPoints: [`src/${driver}.ts`],
    outfile: `dist/${driver}.mjs`,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
  });
}
