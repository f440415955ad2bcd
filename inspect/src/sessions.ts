// The user's sessions, newest first and searchable; a session's turns as a timeline with
// its event log beside it.
import type { ContextdClient, Session } from "@contextd/client/web";
import { h, tokens, when } from "./dom.js";

const MAX_SESSIONS = 2000;

export type LogEvent = Record<string, unknown> & {
  type?: string;
  turn?: number;
  step?: number;
  content?: string;
  meta?: Record<string, unknown>;
  ts?: string;
};

export async function listSessions(client: ContextdClient, user: string): Promise<Session[]> {
  const sessions: Session[] = [];
  let pageToken = "";
  do {
    const page = await client.sessions.listSessions({ userId: user, pageSize: 200, pageToken });
    sessions.push(...page.sessions);
    pageToken = page.nextPageToken;
  } while (pageToken && sessions.length < MAX_SESSIONS);
  return sessions;
}

export function sessionsPage(
  sessions: Session[],
  query: string,
  onQuery: (q: string) => void,
): HTMLElement {
  const rows = h("tbody", {});
  const count = h("p", { class: "count", "aria-live": "polite" });
  const show = (q: string) => {
    const needle = q.trim().toLowerCase();
    const found = sessions.filter((s) =>
      [s.id, s.title, s.scenario, s.host, ...Object.values(s.metadata)].some((v) =>
        v.toLowerCase().includes(needle),
      ),
    );
    rows.replaceChildren(
      ...found.map((s) =>
        h(
          "tr",
          {},
          h(
            "td",
            {},
            h("a", { href: `#/session/${encodeURIComponent(s.id)}` }, s.title || "(untitled)"),
          ),
          h("td", { class: "mono" }, s.id),
          h("td", {}, [s.host, s.scenario].filter(Boolean).join(" · ")),
          h("td", { class: "num" }, s.messageCount),
          h("td", {}, when(s.updateTime?.seconds)),
        ),
      ),
    );
    count.textContent = `${found.length} of ${sessions.length} sessions`;
  };
  const search = h("input", {
    type: "search",
    id: "session-search",
    value: query,
    placeholder: "title, id, host, scenario, metadata",
    oninput: (e: Event) => {
      const q = (e.target as HTMLInputElement).value;
      show(q);
      onQuery(q);
    },
  });
  show(query);
  return h(
    "section",
    { class: "sessions" },
    h("h1", {}, "Sessions"),
    h("label", { for: "session-search" }, "Search "),
    search,
    count,
    h(
      "table",
      { class: "list" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "title"),
          h("th", {}, "id"),
          h("th", {}, "host · scenario"),
          h("th", {}, "messages"),
          h("th", {}, "last active"),
        ),
      ),
      rows,
    ),
  );
}

export async function readEvents(
  client: ContextdClient,
  user: string,
  sessionId: string,
): Promise<LogEvent[]> {
  const events: LogEvent[] = [];
  for await (const piece of client.sessions.exportEvents({ userId: user, sessionId })) {
    events.push(JSON.parse(piece.json) as LogEvent);
  }
  return events;
}

interface TurnRow {
  turn: number;
  question: string;
  status: string;
  prompt: number;
  completion: number;
  durationMs: number;
  tools: string[];
  steps: number;
  hasReport: boolean;
}

function turnRows(events: LogEvent[]): TurnRow[] {
  const turns = new Map<number, TurnRow>();
  for (const e of events) {
    if (typeof e.turn !== "number") {
      continue;
    }
    let row = turns.get(e.turn);
    if (row === undefined) {
      row = {
        turn: e.turn,
        question: "",
        status: "open",
        prompt: 0,
        completion: 0,
        durationMs: 0,
        tools: [],
        steps: 0,
        hasReport: false,
      };
      turns.set(e.turn, row);
    }
    const meta = e.meta ?? {};
    if (e.type === "turn_start" && !row.question) {
      row.question = typeof e.content === "string" ? e.content : "";
      row.hasReport ||= typeof meta.context === "object";
    } else if (e.type === "action" && typeof meta.tool === "string") {
      row.tools.push(meta.tool);
    } else if (e.type === "turn_end") {
      const usage = (meta.tokens ?? {}) as Record<string, unknown>;
      row.status = String(meta.status ?? "");
      row.prompt = Number(usage.prompt ?? 0);
      row.completion = Number(usage.completion ?? 0);
      row.durationMs = Number(meta.durationMs ?? 0);
      row.steps = Number(meta.stepCount ?? 0);
    }
  }
  return [...turns.values()];
}

export function sessionPage(session: Session, events: LogEvent[]): HTMLElement {
  const start = [...events].reverse().find((e) => e.type === "session_start");
  const model = start?.meta
    ? `${String(start.meta.provider ?? "")} ${String(start.meta.model ?? "")}`.trim()
    : "";
  const base = `#/session/${encodeURIComponent(session.id)}`;
  const timeline = h(
    "ol",
    { class: "timeline", "aria-label": "turns" },
    turnRows(events).map((t) =>
      h(
        "li",
        { class: `turn status-${t.status}` },
        h("a", { href: `${base}/turn/${t.turn}` }, `Turn ${t.turn}`),
        h("span", { class: "status" }, t.status),
        h("div", { class: "question" }, t.question),
        h(
          "div",
          { class: "facts" },
          `${tokens(t.prompt)} in · ${tokens(t.completion)} out · ${(t.durationMs / 1000).toFixed(2)} s · ${t.steps} step${t.steps === 1 ? "" : "s"}`,
          model ? ` · ${model}` : "",
          t.tools.length ? ` · tools: ${t.tools.join(", ")}` : "",
        ),
      ),
    ),
  );
  const log = h(
    "ol",
    { class: "events", "aria-label": "event log" },
    events.map((e) =>
      h(
        "li",
        { class: `event type-${e.type ?? ""}` },
        h("span", { class: "etype" }, String(e.type ?? "")),
        typeof e.turn === "number" ? ` turn ${e.turn}` : "",
        typeof e.step === "number" ? ` step ${e.step}` : "",
        h("span", { class: "ts" }, ` ${String(e.ts ?? "")}`),
        typeof e.content === "string" && e.content
          ? h("div", { class: "text clip" }, e.content)
          : null,
        e.meta && Object.keys(e.meta).length
          ? h(
              "div",
              { class: "meta mono clip" },
              JSON.stringify(e.meta, (k, v: unknown) =>
                k === "context" ? "(build report: open the turn)" : v,
              ),
            )
          : null,
      ),
    ),
  );
  return h(
    "section",
    { class: "session" },
    h("p", { class: "crumbs" }, h("a", { href: "#/sessions" }, "Sessions"), " / ", session.id),
    h("h1", {}, session.title || "(untitled)"),
    h(
      "p",
      { class: "facts" },
      `${session.messageCount} messages · created ${when(session.createTime?.seconds)} · last active ${when(session.updateTime?.seconds)}`,
      session.host ? ` · host ${session.host}` : "",
      session.scenario ? ` · scenario ${session.scenario}` : "",
    ),
    h(
      "div",
      { class: "split" },
      h("div", {}, h("h2", {}, "Turns"), timeline),
      h("div", {}, h("h2", {}, "Event log"), log),
    ),
  );
}
