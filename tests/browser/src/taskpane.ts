// The add-in's task pane script: talks to contextd's gRPC-Web port from another origin,
// runs the scenario named in the page's query, and publishes what happened as
// window.contextdReport for the test (and as a list on the page, for a person).
//
// Query: ?scenario=tour|aborted-turn|refused-origin|signed-in&endpoint=<web port URL>&user=<user id>
// Fragment (never sent to the page's server): #token=<bearer token>, sent to contextd as
// the Authorization header of every call when given.
import type { Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

import { recorder, type CallRecord } from "./recorder";
import { abortedTurn, clients, refusedOrigin, signedIn, tour, type Clients } from "./scenarios";

export interface Report {
  scenario: string;
  origin: string;
  calls: CallRecord[];
  failure: string | null;
  done: boolean;
}

declare global {
  interface Window {
    contextdReport?: Report;
  }
}

const scenarios: Record<string, (c: Clients, user: string) => Promise<void>> = {
  tour,
  "aborted-turn": abortedTurn,
  "refused-origin": refusedOrigin,
  "signed-in": signedIn,
};

/**
 * Sets `Authorization: Bearer <token>` on every call, asking `token` each time, as an add-in
 * does with Office's `OfficeRuntime.auth.getAccessToken()` (which refreshes the token).
 * The browser asks for the header in each CORS preflight (Access-Control-Request-Headers).
 */
function bearer(token: () => Promise<string>): Interceptor {
  return (next) => async (request) => {
    request.header.set("Authorization", `Bearer ${await token()}`);
    return next(request);
  };
}

function render(report: Report): void {
  const list = document.getElementById("calls");
  if (list === null) {
    return;
  }
  list.replaceChildren(
    ...report.calls.map((call) => {
      const item = document.createElement("li");
      item.textContent = `${call.method}: ${call.error?.code ?? "OK"}`;
      return item;
    }),
  );
  const status = document.getElementById("status");
  if (status !== null) {
    status.textContent = report.failure ?? "done";
  }
}

async function main(): Promise<void> {
  const query = new URLSearchParams(window.location.search);
  const scenario = query.get("scenario") ?? "";
  const report: Report = {
    scenario,
    origin: window.location.origin,
    calls: [],
    failure: null,
    done: false,
  };
  window.contextdReport = report;
  try {
    const run = scenarios[scenario];
    if (run === undefined) {
      throw new Error(`unknown scenario ${JSON.stringify(scenario)}`);
    }
    const token = new URLSearchParams(window.location.hash.slice(1)).get("token");
    const interceptors = [recorder(report.calls)];
    if (token) {
      interceptors.push(bearer(async () => token));
    }
    const transport = createGrpcWebTransport({
      baseUrl: query.get("endpoint") ?? "",
      useBinaryFormat: true,
      interceptors,
    });
    await run(clients(transport), query.get("user") ?? "");
  } catch (reason) {
    report.failure = reason instanceof Error ? (reason.stack ?? String(reason)) : String(reason);
  } finally {
    report.done = true;
    render(report);
  }
}

void main();
