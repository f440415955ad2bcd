// BuildMessages on a history pasted or loaded from a session: the input with what the
// build did to each message beside the list it built and its report.
import {
  CacheLayout,
  OutputFormat,
  Role,
  type BuildMessagesResponse,
  type ContextdClient,
} from "@contextd/client/web";
import { h, tokens } from "./dom.js";
import {
  budgetView,
  fromBuildReport,
  historyView,
  messageCard,
  prefixMarker,
  type Shown,
} from "./report.js";
import { listMessages } from "./turn.js";

/** A BuildMessages request as the client takes it (plain objects). */
export type BuildRequest = Parameters<ContextdClient["context"]["buildMessages"]>[0];
type HistoryMessage = NonNullable<BuildRequest["history"]>[number];

export interface InputMessage {
  role: string;
  content: string;
  tool_calls?: { id: string; name: string; arguments?: string }[];
  tool_call_id?: string;
}

const ROLES: Record<string, Role> = {
  system: Role.SYSTEM,
  user: Role.USER,
  assistant: Role.ASSISTANT,
  tool: Role.TOOL,
};

export const EXAMPLE: InputMessage[] = [
  { role: "user", content: "帮我总结一下上周的销售数据。" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "call_1", name: "read_sheet", arguments: '{"sheet":"sales"}' }],
  },
  {
    role: "tool",
    tool_call_id: "call_1",
    content: "region,week,revenue\n" + "north,46,1200\nsouth,46,980\n".repeat(60),
  },
  { role: "assistant", content: "上周北区收入 1200，南区 980；north is ahead by 22%." },
  { role: "user", content: "And the week before?" },
  { role: "assistant", content: "Week 45: north 1100, south 1010." },
];

/** The history field's JSON as messages; throws naming the entry and field at fault. */
export function parseHistory(text: string): HistoryMessage[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text || "[]");
  } catch (error) {
    throw new Error(`history: not JSON (${(error as Error).message})`);
  }
  if (!Array.isArray(parsed)) {
    throw new Error("history: a JSON array of messages");
  }
  return parsed.map((raw: unknown, i) => {
    const m = raw as Partial<InputMessage>;
    const role = ROLES[String(m?.role)];
    if (role === undefined) {
      throw new Error(`history[${i}].role: one of ${Object.keys(ROLES).join(", ")}`);
    }
    if (m.content !== undefined && typeof m.content !== "string") {
      throw new Error(`history[${i}].content: a string`);
    }
    return {
      role,
      content: m.content ?? "",
      toolCallId: m.tool_call_id ?? "",
      toolCalls: (m.tool_calls ?? []).map((c) => ({
        id: String(c.id),
        name: String(c.name),
        arguments: c.arguments ?? "",
      })),
    };
  });
}

export async function historyOfSession(
  client: ContextdClient,
  user: string,
  sessionId: string,
): Promise<InputMessage[]> {
  return (await listMessages(client, user, sessionId)).map(({ message: m }) => {
    const shown: InputMessage = {
      role: (Role[m?.role ?? 0] ?? "user").toLowerCase(),
      content: m?.content ?? "",
    };
    if (m?.toolCalls.length) {
      shown.tool_calls = m.toolCalls.map((c) => ({
        id: c.id,
        name: c.name,
        arguments: c.arguments,
      }));
    }
    if (m?.toolCallId) {
      shown.tool_call_id = m.toolCallId;
    }
    return shown;
  });
}

export function playgroundForm(
  tokenizers: string[],
  fallback: string,
  onBuild: (form: FormData) => void,
  onLoad: (id: string) => void,
): HTMLElement {
  const number = (id: string, label: string, value: string, min = "0") =>
    h("label", { for: id }, label, h("input", { id, name: id, type: "number", min, value }));
  const select = (id: string, label: string, options: [string, string][]) =>
    h(
      "label",
      { for: id },
      label,
      h(
        "select",
        { id, name: id },
        options.map(([value, text]) => h("option", { value }, text)),
      ),
    );
  const sessionId = h("input", { id: "load-session", placeholder: "a session id" });
  return h(
    "form",
    {
      class: "playground-form",
      onsubmit: (e: Event) => {
        e.preventDefault();
        onBuild(new FormData(e.target as HTMLFormElement));
      },
    },
    h(
      "label",
      { for: "system" },
      "system prompt",
      h(
        "textarea",
        { id: "system", name: "system", rows: 2 },
        "You are a careful analyst. 回答时使用用户的语言。",
      ),
    ),
    h(
      "label",
      { for: "history" },
      "history (JSON: role, content, tool_calls, tool_call_id)",
      h(
        "textarea",
        { id: "history", name: "history", rows: 10, spellcheck: "false" },
        JSON.stringify(EXAMPLE, null, 1),
      ),
    ),
    h(
      "div",
      { class: "row" },
      h("label", { for: "load-session" }, "or load a session", sessionId),
      h(
        "button",
        { type: "button", id: "load", onclick: () => onLoad(sessionId.value.trim()) },
        "Load",
      ),
    ),
    h(
      "label",
      { for: "user-message" },
      "user message",
      h("input", { id: "user-message", name: "user-message", value: "哪个区域增长最快？" }),
    ),
    h(
      "div",
      { class: "row" },
      number("budget", "budget (tokens)", "400", "1"),
      select(
        "tokenizer",
        "tokenizer",
        tokenizers.map((t) => [t, t === fallback ? `${t} (default)` : t]),
      ),
      select("format", "output format", [
        ["NEUTRAL", "neutral"],
        ["OPENAI", "OpenAI"],
        ["ANTHROPIC", "Anthropic"],
      ]),
      select("cache", "cache layout", [
        ["OFF", "off"],
        ["STABLE_PREFIX", "stable prefix"],
      ]),
    ),
    h(
      "fieldset",
      { class: "row" },
      h("legend", {}, "editing tool results (empty: the server's default)"),
      number("cap", "cap per result", ""),
      number("clear-trigger", "clear over", ""),
      number("keep", "keep newest", ""),
      number("clear-at-least", "clear at least", ""),
      h(
        "label",
        { for: "clear-inputs" },
        h("input", { id: "clear-inputs", name: "clear-inputs", type: "checkbox" }),
        " clear inputs too",
      ),
    ),
    h("button", { type: "submit", id: "build" }, "Build"),
  );
}

export function requestOf(form: FormData): BuildRequest {
  const read = (k: string) => String(form.get(k) ?? "").trim();
  const optional = (k: string) => (read(k) === "" ? undefined : Number(read(k)));
  const system = read("system");
  return {
    systemPrompts: system ? [system] : [],
    history: parseHistory(read("history")),
    userMessage: read("user-message"),
    tokenBudget: Number(read("budget")),
    tokenizer: read("tokenizer"),
    outputFormat: OutputFormat[read("format") as keyof typeof OutputFormat],
    cacheLayout: CacheLayout[read("cache") as keyof typeof CacheLayout],
    editing: {
      toolResultCapTokens: optional("cap"),
      clearTriggerTokens: optional("clear-trigger"),
      keepToolResults: optional("keep"),
      clearAtLeastTokens: optional("clear-at-least"),
      clearToolInputs: form.get("clear-inputs") === "on" ? true : undefined,
      excludeTools: [],
    },
  };
}

export function resultView(request: BuildRequest, built: BuildMessagesResponse): HTMLElement {
  if (built.report === undefined) {
    return h("p", { class: "warn" }, "The server answered without a report.");
  }
  const report = fromBuildReport(built.report);
  const input: Shown[] = (request.history ?? []).map((m, index) => ({
    index,
    role: (Role[m.role ?? 0] ?? "").toLowerCase(),
    text: m.content ?? "",
    toolCalls: m.toolCalls?.map((c) => `${c.name} (${c.id})`),
    toolCallId: m.toolCallId,
  }));
  const output = built.messages.map((m, index) =>
    messageCard({
      index,
      role: (Role[m.role] ?? "").toLowerCase(),
      text: m.content,
      tokens: m.tokens,
      toolCalls: m.toolCalls.map((c) => `${c.name} (${c.id})`),
      toolCallId: m.toolCallId,
    }),
  );
  return h(
    "div",
    { class: "split playground-result" },
    h(
      "section",
      { "aria-label": "the input" },
      h("h2", {}, "Input: what the build did to each message"),
      historyView(report, input),
    ),
    h(
      "section",
      { "aria-label": "the result" },
      h("h2", {}, `Result: ${built.messages.length} messages, ${tokens(report.total)}`),
      budgetView(report),
      h("ol", { class: "history built" }, withPrefixEnd(report, built, output)),
      built.payloadJson
        ? h(
            "details",
            {},
            h("summary", {}, "payload for the provider"),
            h("pre", { class: "mono" }, JSON.stringify(JSON.parse(built.payloadJson), null, 1)),
          )
        : null,
    ),
  );
}

/** The built messages, with the end of the cacheable prefix marked after the last
 * message it holds (the prefix is whole leading messages). */
function withPrefixEnd(
  report: ReturnType<typeof fromBuildReport>,
  built: BuildMessagesResponse,
  cards: HTMLElement[],
): HTMLElement[] {
  const items = cards.map((card) => h("li", {}, card));
  let sum = 0;
  const end = built.messages.findIndex((m) => (sum += m.tokens) >= report.cacheablePrefix);
  const marker = prefixMarker(report);
  if (marker !== null && end >= 0) {
    items.splice(end + 1, 0, h("li", {}, marker));
  }
  return items;
}
