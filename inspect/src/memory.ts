// The user's memories with their scope, metadata, validity and history, filtered as the
// API filters them, and a search that shows how each candidate scored.
import type { ContextdClient, Memory, ScoredMemory } from "@contextd/client/web";
import { h, when } from "./dom.js";

export interface MemoryQuery {
  agent: string; // "*": any agent
  app: string; // "*": any app
  metadata: string; // "key=value, key=value"
  asOf: string; // a datetime-local value, or ""
  search: string;
}

export const ANY = "*";

/** A memory filter as the client takes it (plain objects). */
export type Filter = NonNullable<Parameters<ContextdClient["memory"]["listMemories"]>[0]["filter"]>;

/** The filter of the API, from the page's fields; throws with the field's name. */
export function filterOf(q: MemoryQuery): Filter {
  const metadata: Record<string, string> = {};
  for (const pair of q.metadata
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at <= 0) {
      throw new Error(`metadata: "${pair.slice(0, 40)}" is not key=value`);
    }
    metadata[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  const filter: Filter = { metadata };
  if (q.agent !== ANY) {
    filter.agent = q.agent;
  }
  if (q.app !== ANY) {
    filter.app = q.app;
  }
  if (q.asOf) {
    const ms = Date.parse(q.asOf);
    if (Number.isNaN(ms)) {
      throw new Error("as of: not a date and time");
    }
    filter.asOf = {
      $typeName: "google.protobuf.Timestamp",
      seconds: BigInt(Math.floor(ms / 1000)),
      nanos: 0,
    };
  }
  return filter;
}

export async function listMemories(
  client: ContextdClient,
  user: string,
  filter: Filter,
): Promise<Memory[]> {
  const memories: Memory[] = [];
  let pageToken = "";
  do {
    const page = await client.memory.listMemories({
      userId: user,
      pageSize: 200,
      pageToken,
      filter,
    });
    memories.push(...page.memories);
    pageToken = page.nextPageToken;
  } while (pageToken && memories.length < 2000);
  return memories;
}

function scope(m: Memory): string {
  const parts = [
    m.scope?.agent ? `agent ${m.scope.agent}` : "",
    m.scope?.app ? `app ${m.scope.app}` : "",
  ].filter(Boolean);
  return parts.length ? parts.join(" · ") : "the user as a whole";
}

function validity(m: Memory): string {
  const from = m.validFrom ? `from ${when(m.validFrom.seconds)}` : "";
  const to = m.validTo ? `until ${when(m.validTo.seconds)}` : "still true";
  const expiry = m.expireTime ? ` · forgotten at ${when(m.expireTime.seconds)}` : "";
  const replaced = m.supersededBy ? ` · superseded by ${m.supersededBy}` : "";
  return `${[from, to].filter(Boolean).join(" ")}${expiry}${replaced}`;
}

export function memoryForm(q: MemoryQuery, onSubmit: (q: MemoryQuery) => void): HTMLElement {
  const field = (id: string, label: string, value: string, hint: string) =>
    h("label", { for: id }, label, h("input", { id, name: id, value, placeholder: hint }));
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (e: Event) => {
        e.preventDefault();
        const data = new FormData(e.target as HTMLFormElement);
        const read = (k: string) => String(data.get(k) ?? "");
        onSubmit({
          agent: read("agent"),
          app: read("app"),
          metadata: read("metadata"),
          asOf: read("as-of"),
          search: read("search"),
        });
      },
    },
    field("agent", "agent", q.agent, "* any, empty: none"),
    field("app", "app", q.app, "* any, empty: none"),
    field("metadata", "metadata", q.metadata, "key=value, key=value"),
    h(
      "label",
      { for: "as-of" },
      "as of",
      h("input", { id: "as-of", name: "as-of", type: "datetime-local", value: q.asOf }),
    ),
    field("search", "search for", q.search, "a question, to see each candidate's scores"),
    h("button", { type: "submit" }, "Apply"),
  );
  return form;
}

/** A part of a result's ranking, or why it has none. */
function part(value: number | undefined, missing: string): string {
  return value === undefined ? `— (${missing})` : value.toFixed(4);
}

export function searchView(found: ScoredMemory[], note: string): HTMLElement {
  return h(
    "section",
    { class: "search" },
    h("h2", {}, "Search: how each candidate ranked"),
    note ? h("p", { class: "warn" }, note) : null,
    h(
      "table",
      { class: "list", id: "search-results" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { title: "the fused ranking's order" }, "rank"),
          h("th", {}, "score"),
          h("th", { title: "relevance by the query's terms (full-text search)" }, "term score"),
          h("th", { title: "cosine with the query's vector (search by meaning)" }, "cosine"),
          h("th", {}, "relevance"),
          h("th", {}, "recency"),
          h("th", {}, "memory"),
        ),
      ),
      h(
        "tbody",
        {},
        found.map((s, i) =>
          h(
            "tr",
            {},
            h("td", { class: "num" }, i + 1),
            h("td", { class: "num" }, s.score.toFixed(4)),
            h("td", { class: "num" }, part(s.explain?.termScore, "not found by its terms")),
            h("td", { class: "num" }, part(s.explain?.cosine, "not ranked by meaning")),
            h("td", { class: "num" }, s.relevance.toFixed(4)),
            h("td", { class: "num" }, s.recency.toFixed(4)),
            h("td", {}, s.memory?.content ?? ""),
          ),
        ),
      ),
    ),
    found.length ? null : h("p", {}, "No memory matched."),
  );
}

export function memoryList(
  client: ContextdClient,
  user: string,
  memories: Memory[],
  onError: (e: unknown) => void,
): HTMLElement {
  return h(
    "table",
    { class: "list memories", id: "memory-list" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "memory"),
        h("th", {}, "scope"),
        h("th", {}, "metadata"),
        h("th", {}, "validity"),
        h("th", {}, "history"),
      ),
    ),
    h(
      "tbody",
      {},
      memories.map((m) => {
        const history = h("div", { class: "history-of", "aria-live": "polite" });
        const button = h(
          "button",
          {
            type: "button",
            "aria-expanded": "false",
            onclick: () => {
              const open = button.getAttribute("aria-expanded") === "true";
              button.setAttribute("aria-expanded", String(!open));
              if (open) {
                history.replaceChildren();
                return;
              }
              client.memory
                .listMemoryHistory({ userId: user, memoryId: m.id, pageSize: 50 })
                .then((r) =>
                  history.replaceChildren(
                    r.changes.length
                      ? h(
                          "ol",
                          {},
                          r.changes.map((c) =>
                            h(
                              "li",
                              {},
                              h("strong", {}, c.action),
                              ` ${when(c.changeTime?.seconds)} by ${c.method}: `,
                              c.oldContent ? h("del", {}, c.oldContent) : null,
                              c.oldContent ? " → " : "",
                              h("ins", {}, c.newContent),
                            ),
                          ),
                        )
                      : h("p", {}, "No change recorded."),
                  ),
                )
                .catch(onError);
            },
          },
          "show",
        );
        return h(
          "tr",
          { "data-memory": m.id },
          h("td", {}, m.content, h("div", { class: "mono dim" }, m.id)),
          h("td", {}, scope(m)),
          h(
            "td",
            { class: "mono" },
            Object.entries(m.metadata)
              .map(([k, v]) => `${k}=${v}`)
              .join(", "),
          ),
          h("td", {}, validity(m)),
          h("td", {}, button, history),
        );
      }),
    ),
  );
}
