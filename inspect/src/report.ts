// A build report, from BuildMessages (the playground) or as a turn's event log keeps it
// (meta.context of turn_start), in one shape, and how it is drawn: the parts of the
// budget, the context layers, and the message list with what was dropped, edited and
// moved shown in place, each with its reason.
import { DropReason, EditKind, type BuildReport } from "@contextd/client/web";
import { bar, h, tokens } from "./dom.js";

export interface Dropped {
  start: number;
  count: number;
  reason: string;
}
export interface Edit {
  index: number;
  kind: string;
  before: number;
  after: number;
  toolCallId: string;
  toolName: string;
  count: number;
}
export interface Moved {
  toolCallId: string;
  from: number;
  callIndex: number;
}
export interface Layer {
  name: string;
  included: boolean;
  tokens: number;
  kept?: number;
  dropped?: number;
  note?: string;
}
export interface Report {
  tokenizer: string;
  budget: number;
  total: number;
  system: number;
  summary: number;
  history: number;
  user: number;
  overBudget: boolean;
  summaryIncluded: boolean;
  historyKept: number;
  dropped: Dropped[];
  edits: Edit[];
  moved: Moved[];
  removedCalls: { index: number; toolCallId: string }[];
  cacheablePrefix: number;
  layers: Layer[];
  memories: { content: string; score: number }[];
  /** The compression summary's text, when the turn's event log keeps it. */
  summaryText?: string;
}

export function fromBuildReport(r: BuildReport): Report {
  const contextLayers: Layer[] = r.contextLayers.map((l) => ({
    name: l.name,
    included: l.included,
    tokens: l.tokens,
    kept: l.itemsKept,
    dropped: l.itemsDropped,
    note: l.note,
  }));
  return {
    tokenizer: r.tokenizer,
    budget: r.tokenBudget,
    total: r.totalTokens,
    system: r.systemTokens,
    summary: r.summaryTokens,
    history: r.historyTokens,
    user: r.userMessageTokens,
    overBudget: r.requiredOverBudget,
    summaryIncluded: r.summaryIncluded,
    historyKept: r.historyKept,
    dropped: r.dropped.map((d) => ({
      start: d.startIndex,
      count: d.count,
      reason: (DropReason[d.reason] ?? "").toLowerCase(),
    })),
    edits: r.edits.map((e) => ({
      index: e.index,
      kind: (EditKind[e.kind] ?? "").toLowerCase(),
      before: e.tokensBefore,
      after: e.tokensAfter,
      toolCallId: e.toolCallId,
      toolName: e.toolName,
      count: e.count,
    })),
    moved: r.movedToolResults.map((m) => ({
      toolCallId: m.toolCallId,
      from: m.fromIndex,
      callIndex: m.callIndex,
    })),
    removedCalls: r.removedToolCalls.map((c) => ({ index: c.index, toolCallId: c.toolCallId })),
    cacheablePrefix: r.cacheablePrefixTokens,
    layers: contextLayers.length ? contextLayers : r.layers.map((l) => ({ ...l })),
    memories: [],
  };
}

type Json = Record<string, unknown>;
const num = (v: unknown): number => (typeof v === "number" ? v : 0);
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const list = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);

/** The report a turn's turn_start event keeps (snake_case, as the server writes it). */
export function fromStored(c: Json): Report {
  return {
    tokenizer: str(c.tokenizer),
    budget: num(c.token_budget),
    total: num(c.total_tokens),
    system: num(c.system_tokens),
    summary: num(c.summary_tokens),
    history: num(c.history_tokens),
    user: num(c.user_message_tokens),
    overBudget: c.required_over_budget === true,
    summaryIncluded: c.summary_included === true,
    historyKept: num(c.history_kept),
    dropped: list(c.dropped).map((d) => ({
      start: num(d.start_index),
      count: num(d.count),
      reason: str(d.reason),
    })),
    edits: list(c.edits).map((e) => ({
      index: num(e.index),
      kind: str(e.kind),
      before: num(e.tokens_before),
      after: num(e.tokens_after),
      toolCallId: str(e.tool_call_id),
      toolName: str(e.tool_name),
      count: num(e.count) || 1,
    })),
    moved: list(c.moved_tool_results).map((m) => ({
      toolCallId: str(m.tool_call_id),
      from: num(m.from_index),
      callIndex: num(m.call_index),
    })),
    removedCalls: list(c.removed_tool_calls).map((r) => ({
      index: num(r.index),
      toolCallId: str(r.tool_call_id),
    })),
    cacheablePrefix: num(c.cacheable_prefix_tokens),
    layers: (list(c.context_layers).length ? list(c.context_layers) : list(c.layers)).map((l) => ({
      name: str(l.name),
      included: l.included === true,
      tokens: num(l.tokens),
      kept: typeof l.items_kept === "number" ? l.items_kept : undefined,
      dropped: typeof l.items_dropped === "number" ? l.items_dropped : undefined,
      note: str(l.note),
    })),
    memories: list(c.memories).map((m) => ({ content: str(m.content), score: num(m.score) })),
    summaryText: typeof c.summary === "string" ? c.summary : undefined,
  };
}

const DROP_REASONS: Record<string, string> = {
  budget: "over the token budget (oldest first)",
  compressed: "replaced by the compression summary",
  empty: "empty: no text and no tool calls",
  orphaned_tool_result: "a tool result that answers no waiting call",
  leading_assistant: "an assistant message before the first user message",
};
const EDIT_REASONS: Record<string, string> = {
  capped: "tool result over the cap: its head and tail kept around a marker",
  cleared: "old tool result cleared: replaced by a placeholder naming the tool and size",
  compacted: "replaced by the compaction summary",
};

export function dropReason(reason: string): string {
  return DROP_REASONS[reason] ?? reason;
}

/** Totals: the parts of the message list as one bar each against the budget. */
export function budgetView(r: Report): HTMLElement {
  const parts: [string, number][] = [
    ["system", r.system],
    ["summary", r.summary],
    ["history", r.history],
    ["user message", r.user],
  ];
  return h(
    "section",
    { class: "budget", "aria-label": "tokens against the budget" },
    h(
      "p",
      {},
      h("strong", {}, `${tokens(r.total)} of ${tokens(r.budget)}`),
      ` · tokenizer ${r.tokenizer} · ${r.historyKept} history messages kept`,
      r.overBudget
        ? h("span", { class: "warn" }, " · system and user message alone exceed the budget")
        : null,
    ),
    bar(r.total, r.budget, `${r.total} of ${r.budget} tokens`, "total"),
    h(
      "table",
      { class: "layers" },
      h("caption", {}, "Parts and layers"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "part"),
          h("th", {}, "tokens"),
          h("th", {}, "share of the budget"),
          h("th", {}, "note"),
        ),
      ),
      h(
        "tbody",
        {},
        parts.map(([name, n]) => layerRow(name, n, r.budget, n > 0, "")),
        r.layers.map((l) =>
          layerRow(
            `layer: ${l.name}`,
            l.tokens,
            r.budget,
            l.included,
            [
              l.kept !== undefined && (l.kept || l.dropped)
                ? `${l.kept} kept, ${l.dropped} dropped`
                : "",
              l.note ?? "",
            ]
              .filter(Boolean)
              .join(" · "),
          ),
        ),
      ),
    ),
  );
}

function layerRow(
  name: string,
  n: number,
  budget: number,
  included: boolean,
  note: string,
): HTMLElement {
  return h(
    "tr",
    { class: included ? "" : "absent", "data-layer": name },
    h("th", { scope: "row" }, name),
    h("td", { class: "num" }, n.toLocaleString("en")),
    h("td", {}, bar(n, budget, `${n} of ${budget} tokens`)),
    h("td", {}, included ? note : note || "not included"),
  );
}

/** A message of the history, at its index in the report's index space. */
export interface Shown {
  index: number;
  role: string;
  text: string;
  tokens?: number;
  toolCalls?: string[];
  toolCallId?: string;
  status?: string;
}

export function messageCard(m: Shown, badges: HTMLElement[] = []): HTMLElement {
  return h(
    "article",
    { class: `msg role-${m.role}`, "data-index": m.index, tabindex: 0 },
    h(
      "header",
      {},
      h("span", { class: "role" }, m.role),
      ` #${m.index}`,
      m.tokens ? ` · ${tokens(m.tokens)}` : "",
      m.toolCallId ? ` · answers ${m.toolCallId}` : "",
      m.status ? h("span", { class: "warn" }, ` · ${m.status}`) : null,
      badges,
    ),
    m.text ? h("div", { class: "text" }, m.text) : null,
    m.toolCalls?.length ? h("div", { class: "calls" }, `calls: ${m.toolCalls.join(", ")}`) : null,
  );
}

/**
 * The history as the build treated it, in order: each dropped range collapsed in its
 * place with its reason, each edited or moved message with a badge saying what and
 * why, the compaction where it happened and the end of the cacheable prefix.
 */
export function historyView(
  r: Report,
  history: Shown[],
  before: Node[] = [],
  after: Node[] = [],
): HTMLElement {
  const edits = new Map<number, Edit[]>();
  for (const e of r.edits) {
    edits.set(e.index, [...(edits.get(e.index) ?? []), e]);
  }
  const moved = new Map(r.moved.map((m) => [m.from, m]));
  const removed = new Map(r.removedCalls.map((c) => [c.index, c]));
  const drops = new Map(r.dropped.map((d) => [d.start, d]));
  const byIndex = new Map(history.map((m) => [m.index, m]));
  const out = h("ol", { class: "history", "aria-label": "the messages in order" });
  const item = (node: Node) => out.appendChild(h("li", {}, node));
  before.forEach(item);
  const last = Math.max(
    -1,
    ...history.map((m) => m.index),
    ...r.dropped.map((d) => d.start + d.count - 1),
  );
  for (let i = 0; i <= last; i++) {
    const drop = drops.get(i);
    if (drop !== undefined) {
      const compaction = (edits.get(i) ?? []).find((e) => e.kind === "compacted");
      item(
        h(
          "div",
          {
            class: `dropped reason-${drop.reason}`,
            "data-start": drop.start,
            "data-count": drop.count,
            tabindex: 0,
          },
          h("strong", {}, `${drop.count} message${drop.count === 1 ? "" : "s"} dropped`),
          ` (#${drop.start}${drop.count > 1 ? `–#${drop.start + drop.count - 1}` : ""}): ${dropReason(drop.reason)}`,
          compaction
            ? ` — ${tokens(compaction.before)} became a summary of ${tokens(compaction.after)}`
            : "",
        ),
      );
      i += drop.count - 1;
      continue;
    }
    const m = byIndex.get(i);
    if (m === undefined) {
      continue;
    }
    const badges = (edits.get(i) ?? []).map((e) =>
      h(
        "span",
        { class: `badge edit-${e.kind}`, title: EDIT_REASONS[e.kind] ?? e.kind },
        `${e.kind}${e.toolName ? ` ${e.toolName}` : ""}: ${tokens(e.before)} → ${tokens(e.after)}`,
      ),
    );
    const move = moved.get(i);
    if (move) {
      badges.push(
        h("span", { class: "badge moved" }, `moved back behind its call #${move.callIndex}`),
      );
    }
    const cut = removed.get(i);
    if (cut) {
      badges.push(
        h("span", { class: "badge removed" }, `tool call ${cut.toolCallId} removed: no result`),
      );
    }
    const card = messageCard(m, badges);
    for (const e of edits.get(i) ?? []) {
      card.appendChild(h("p", { class: "reason" }, EDIT_REASONS[e.kind] ?? e.kind));
    }
    item(card);
  }
  after.forEach(item);
  return out;
}

export function prefixMarker(r: Report): HTMLElement | null {
  if (r.cacheablePrefix <= 0) {
    return null;
  }
  return h(
    "div",
    { class: "prefix-end", role: "separator" },
    `▲ cacheable prefix: the ${tokens(r.cacheablePrefix)} above stay the same next turn, so a provider's prompt cache can hold them`,
  );
}
