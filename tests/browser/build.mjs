// Bundles the task pane script for the browser and the Playwright driver for Node.
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

await build({
  entryPoints: ["src/drive.ts"],
  outfile: "dist/drive.mjs",
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  packages: "external",
});
