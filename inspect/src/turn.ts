// A turn as the model saw it: the build report its event log keeps (turn_start's
// meta.context) laid over the session's stored messages.
import { Role, type ContextdClient, type SessionMessage } from "@contextd/client/web";
import { h, tokens } from "./dom.js";
import {
  budgetView,
  fromStored,
  historyView,
  messageCard,
  prefixMarker,
  type Shown,
} from "./report.js";
import type { LogEvent } from "./sessions.js";

export async function listMessages(
  client: ContextdClient,
  user: string,
  sessionId: string,
): Promise<SessionMessage[]> {
  const messages: SessionMessage[] = [];
  let pageToken = "";
  do {
    const page = await client.sessions.listMessages({
      userId: user,
      sessionId,
      pageSize: 500,
      pageToken,
    });
    messages.push(...page.messages);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return messages;
}

export function shown(m: SessionMessage): Shown {
  return {
    index: m.seq,
    role: (Role[m.message?.role ?? 0] ?? "").toLowerCase(),
    text:
      m.message?.content ||
      (m.message?.parts ?? [])
        .map((p) => (p.part.case === "text" ? p.part.value : "[image]"))
        .join(" "),
    tokens: m.message?.tokens,
    toolCalls: m.message?.toolCalls.map((c) => `${c.name} (${c.id})`),
    toolCallId: m.message?.toolCallId,
    status: m.status,
  };
}

export function turnPage(
  sessionId: string,
  turn: number,
  events: LogEvent[],
  messages: SessionMessage[],
): HTMLElement {
  const crumbs = h(
    "p",
    { class: "crumbs" },
    h("a", { href: "#/sessions" }, "Sessions"),
    " / ",
    h("a", { href: `#/session/${encodeURIComponent(sessionId)}` }, sessionId),
    ` / turn ${turn}`,
  );
  const start = events.find((e) => e.type === "turn_start" && e.turn === turn);
  if (start === undefined) {
    return h(
      "section",
      {},
      crumbs,
      h("h1", {}, `Turn ${turn}`),
      h("p", { class: "warn", role: "alert" }, "This session's event log has no such turn."),
    );
  }
  const context = start.meta?.context;
  if (typeof context !== "object" || context === null) {
    return h(
      "section",
      {},
      crumbs,
      h("h1", {}, `Turn ${turn}`),
      h(
        "p",
        { class: "warn" },
        "This turn's event log keeps no build report: it ran on a server that did not record one, or was continued with tool results without a new build.",
      ),
    );
  }
  const report = fromStored(context as Record<string, unknown>);
  const user = messages.find((m) => m.turnIndex === turn && m.message?.role === Role.USER);
  const end =
    user?.seq ?? Math.max(0, ...messages.filter((m) => m.turnIndex < turn).map((m) => m.seq + 1));
  const history = messages.filter((m) => m.seq < end).map(shown);
  const volatileAfter =
    report.layers.findIndex((l) => l.name === "window") <
    report.layers.findIndex((l) => l.name === "memory");
  const layerNames = (names: string[]) =>
    report.layers
      .filter((l) => names.includes(l.name) && l.included)
      .map((l) => `${l.name} ${tokens(l.tokens)}`)
      .join(" · ");
  const system = h(
    "div",
    { class: "msg role-system" },
    h("header", {}, h("span", { class: "role" }, "system"), ` · ${tokens(report.system)}`),
    h(
      "div",
      { class: "text" },
      `Layers: ${layerNames(volatileAfter ? ["system", "scenario", "session"] : ["system", "scenario", "session", "memory", "recent_sessions"]) || "none"}`,
    ),
  );
  const summary = report.summaryIncluded
    ? h(
        "div",
        { class: "msg role-summary" },
        h(
          "header",
          {},
          h("span", { class: "role" }, "compression summary"),
          ` · ${tokens(report.summary)}`,
        ),
        report.summaryText === undefined ? null : h("div", { class: "text" }, report.summaryText),
        h("p", { class: "reason" }, "stands in for the messages marked compressed below"),
      )
    : null;
  const volatile =
    volatileAfter && layerNames(["memory", "recent_sessions"])
      ? h(
          "div",
          { class: "msg role-system volatile" },
          h("header", {}, h("span", { class: "role" }, "system (volatile)")),
          h("div", { class: "text" }, `Layers: ${layerNames(["memory", "recent_sessions"])}`),
        )
      : null;
  const userCard = user ? messageCard(shown(user)) : null;
  const memoryList = report.memories.length
    ? h(
        "section",
        { class: "memories" },
        h("h2", {}, "Memories added, with their scores"),
        h(
          "ol",
          {},
          report.memories.map((m) =>
            h("li", {}, h("span", { class: "score" }, m.score.toFixed(4)), " ", m.content),
          ),
        ),
      )
    : null;
  return h(
    "section",
    { class: "turn-view" },
    crumbs,
    h("h1", {}, `Turn ${turn} as the model saw it`),
    budgetView(report),
    memoryList,
    h("h2", {}, "Messages, in order"),
    historyView(
      report,
      history,
      [system, summary].filter((n) => n !== null),
      [prefixMarker(report), volatile, userCard].filter((n) => n !== null),
    ),
  );
}
