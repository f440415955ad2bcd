// Drives the context inspector (/inspect on contextd's web port) in headless Chromium
// (Debian's, never a downloaded build): each visit runs its steps in a fresh tab and
// prints, as JSON on stdout, what the steps read, the timings they measured, the
// console's errors and the calls the page made.
//
// Usage: node dist/inspect.mjs '{"chromium": "/usr/bin/chromium", "timeoutMs": 60000,
//   "visits": [{"name": "sessions", "url": "http://127.0.0.1:PORT/inspect/", "steps": [...]}]}'
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { chromium, type Page } from "playwright-core";

/** One step: wait for a selector, type, press a key, click, go to a hash route, reload,
 * read the text (or an attribute) of every match of a selector, or a field's value, note how long since
 * navigation, or take a picture. */
type Step =
  | { wait: string }
  | { fill: string; value: string }
  | { press: string }
  | { click: string }
  | { hash: string }
  | { reload: true }
  | { read: string; as: string }
  | { attribute: string; name: string; as: string }
  | { value: string; as: string }
  | { mark: string; as: string }
  | { screenshot: string; fullPage?: boolean };

interface Visit {
  name: string;
  url: string;
  steps: Step[];
  viewport?: { width: number; height: number };
}

interface Config {
  chromium: string;
  timeoutMs: number;
  visits: Visit[];
}

interface Result {
  name: string;
  read: Record<string, string[]>;
  timings: Record<string, number>;
  console: string[];
  calls: { url: string; status: number }[];
  headers: Record<string, string>;
}

async function run(page: Page, step: Step, result: Result, timeoutMs: number): Promise<void> {
  if ("wait" in step) {
    await page.waitForSelector(step.wait, { timeout: timeoutMs });
  } else if ("fill" in step) {
    await page.fill(step.fill, step.value);
  } else if ("press" in step) {
    await page.keyboard.press(step.press);
  } else if ("click" in step) {
    await page.click(step.click);
  } else if ("hash" in step) {
    await page.evaluate((hash) => {
      location.hash = hash;
    }, step.hash);
  } else if ("reload" in step) {
    await page.reload();
  } else if ("read" in step) {
    result.read[step.as] = await page.$$eval(step.read, (found) =>
      found.map((e) => (e as HTMLElement).innerText),
    );
  } else if ("attribute" in step) {
    result.read[step.as] = await page.$$eval(
      step.attribute,
      (found, name) => found.map((e) => e.getAttribute(name) ?? ""),
      step.name,
    );
  } else if ("value" in step) {
    result.read[step.as] = [await page.inputValue(step.value)];
  } else if ("mark" in step) {
    // The page marks each view it finished ("inspect:<route>"): its time since navigation
    // started, and the first contentful paint's.
    result.timings[step.as] = await page.evaluate((name) => {
      const [mark] = performance.getEntriesByName(name);
      return mark ? mark.startTime : -1;
    }, step.mark);
    result.timings[`${step.as}: first contentful paint`] = await page.evaluate(() => {
      const [paint] = performance.getEntriesByName("first-contentful-paint");
      return paint ? paint.startTime : -1;
    });
  } else {
    await page.screenshot({ path: step.screenshot, fullPage: step.fullPage ?? false });
  }
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? "{}") as Config;
  const profile = mkdtempSync(join(tmpdir(), "contextd-inspect-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: config.chromium,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"],
  });
  const results: Result[] = [];
  try {
    for (const visit of config.visits) {
      const page = await context.newPage();
      if (visit.viewport) {
        await page.setViewportSize(visit.viewport);
      }
      const result: Result = {
        name: visit.name,
        read: {},
        timings: {},
        console: [],
        calls: [],
        headers: {},
      };
      page.on("console", (m) => {
        if (m.type() === "error") {
          result.console.push(m.text());
        }
      });
      page.on("pageerror", (e) => result.console.push(`pageerror: ${e.message}`));
      page.on("response", (r) => {
        if (r.request().method() === "POST") {
          result.calls.push({ url: r.url(), status: r.status() });
        }
      });
      const response = await page.goto(visit.url);
      result.headers = (await response?.allHeaders()) ?? {};
      try {
        for (const step of visit.steps) {
          await run(page, step, result, config.timeoutMs);
        }
      } catch (error) {
        const shown = await page.evaluate(() => document.body.innerText.slice(0, 2000));
        throw new Error(`${visit.name}: ${String(error)}\npage: ${shown}`);
      }
      results.push(result);
      await page.close();
    }
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(results));
}

await main();
