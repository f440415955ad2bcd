// Opens task pane pages in headless Chromium (Debian's, never a downloaded build) and
// prints, as JSON on stdout, each page's report with what the network layer saw:
// every request to another origin, CORS preflights included, with its status or error.
//
// Usage: node dist/drive.mjs '{"chromium": "/usr/bin/chromium", "timeoutMs": 60000,
//   "pages": [{"name": "tour", "url": "https://localhost:PORT/taskpane.html?..."}]}'
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { chromium, type BrowserContext } from "playwright-core";

interface PageSpec {
  name: string;
  url: string;
}

interface Config {
  chromium: string;
  pages: PageSpec[];
  timeoutMs: number;
}

interface NetworkRecord {
  type: string;
  method: string;
  url: string;
  status?: number;
  allowOrigin?: string;
  /** A preflight's Access-Control-Request-Headers, and the answer's Allow-Headers. */
  requestHeaders?: string;
  allowHeaders?: string;
  failure?: string;
  corsError?: string;
}

interface PageResult {
  name: string;
  report: unknown;
  network: NetworkRecord[];
  console: string[];
}

const SETTLE_MS = 5000;

const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

async function visit(
  context: BrowserContext,
  spec: PageSpec,
  timeoutMs: number,
): Promise<PageResult> {
  const page = await context.newPage();
  const origin = new URL(spec.url).origin;
  const network = new Map<string, NetworkRecord>();
  const logged: string[] = [];
  page.on("console", (message) => logged.push(`${message.type()}: ${message.text()}`));
  page.on("pageerror", (error) => logged.push(`pageerror: ${error.message}`));

  // CDP shows what page events do not: the CORS preflights and why a request failed.
  const cdp = await context.newCDPSession(page);
  cdp.on("Network.requestWillBeSent", (event) => {
    const target = new URL(event.request.url);
    if (target.protocol.startsWith("http") && target.origin !== origin) {
      const sent = Object.fromEntries(
        Object.entries(event.request.headers).map(([name, value]) => [name.toLowerCase(), value]),
      );
      network.set(event.requestId, {
        type: event.type ?? "",
        method: event.request.method,
        url: event.request.url,
        requestHeaders: sent["access-control-request-headers"],
      });
    }
  });
  cdp.on("Network.responseReceived", (event) => {
    const record = network.get(event.requestId);
    if (record !== undefined) {
      const headers = Object.fromEntries(
        Object.entries(event.response.headers).map(([name, value]) => [name.toLowerCase(), value]),
      );
      record.type = event.type; // "Preflight" shows only here
      record.status = event.response.status;
      record.allowOrigin = headers["access-control-allow-origin"];
      record.allowHeaders = headers["access-control-allow-headers"];
    }
  });
  cdp.on("Network.loadingFailed", (event) => {
    const record = network.get(event.requestId);
    if (record !== undefined) {
      record.failure = event.errorText;
      record.corsError = event.corsErrorStatus?.corsError;
    }
  });
  await cdp.send("Network.enable");

  await page.goto(spec.url);
  await page.waitForFunction(() => window.contextdReport?.done === true, undefined, {
    timeout: timeoutMs,
  });
  const report = await page.evaluate(() => window.contextdReport);
  // A refused preflight's response can be reported after the page saw its fetch fail.
  const deadline = Date.now() + SETTLE_MS;
  const settled = (record: NetworkRecord) => record.status ?? record.failure;
  while (![...network.values()].every(settled) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await page.close();
  return { name: spec.name, report, network: [...network.values()], console: logged };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? "{}") as Config;
  const profile = mkdtempSync(join(tmpdir(), "contextd-chromium-"));
  const results: PageResult[] = [];
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: config.chromium,
    headless: true,
    args: CHROMIUM_FLAGS,
    ignoreHTTPSErrors: true, // the page server's certificate is made up by the test
  });
  try {
    for (const spec of config.pages) {
      results.push(await visit(context, spec, config.timeoutMs));
    }
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(results));
}

await main();
