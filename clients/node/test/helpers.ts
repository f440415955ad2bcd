import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { ContextdClient, ContextdError, type Code, type ContextdClientOptions } from "../src/index.js";

/** The live server under test; `tests/test_node_client.py` sets it. */
export const ADDRESS = process.env["CONTEXTD_ADDRESS"] ?? "";
/** The same server's gRPC-Web port, when it has one. */
export const WEB_ADDRESS = process.env["CONTEXTD_WEB_ADDRESS"] ?? "";
/** Why tests of contextd's gRPC-Web port are skipped, or false when they run. */
export const WEB_SKIP = WEB_ADDRESS
  ? false
  : "the server under test has no gRPC-Web port (CONTEXTD_WEB_ADDRESS unset)";

/** A client of the server under test (`address`: another of its ports). */
export function connect(options: ContextdClientOptions & { address?: string } = {}): ContextdClient {
  const { address = ADDRESS, ...rest } = options;
  assert.ok(address, "set CONTEXTD_ADDRESS to the host:port of a running contextd");
  return new ContextdClient(address, { timeoutMs: 20_000, ...rest });
}

/** A user id no other test uses, so tests do not see each other's data. */
export function newUser(label: string): string {
  return `node-${label}-${randomUUID().slice(0, 8)}`;
}

/** Awaits `call`, which must fail with `code`; returns the error. */
export async function rejection(call: Promise<unknown>, code: Code): Promise<ContextdError> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof ContextdError, `not a ContextdError: ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`the call succeeded; expected code ${code}`);
}

export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of stream) {
    items.push(item);
  }
  return items;
}

/** Polls `probe` until it returns a value other than undefined (work the server finishes
 * after answering, such as storing a cancelled turn). */
export async function eventually<T>(probe: () => Promise<T | undefined>, withinMs = 5_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) {
      return value;
    }
    assert.ok(Date.now() < deadline, `not reached within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A second live server, started with `--auth api-key`, and keys of two of its users. */
export const AUTH = {
  address: process.env["CONTEXTD_AUTH_ADDRESS"] ?? "",
  webAddress: process.env["CONTEXTD_AUTH_WEB_ADDRESS"] ?? "",
  alice: process.env["CONTEXTD_AUTH_KEY_ALICE"] ?? "",
  bob: process.env["CONTEXTD_AUTH_KEY_BOB"] ?? "",
};
/** Why the credential tests are skipped, or false when they run. */
export const AUTH_SKIP =
  AUTH.address && AUTH.webAddress && AUTH.alice && AUTH.bob
    ? false
    : "no server with --auth api-key (CONTEXTD_AUTH_ADDRESS, CONTEXTD_AUTH_WEB_ADDRESS, CONTEXTD_AUTH_KEY_ALICE/BOB unset)";
