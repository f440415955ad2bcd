// The inspector's shell: the credential typed in once, the navigation, and the hash
// routes that make a session or a turn a link to share.
import type { ContextdClient } from "@contextd/client/web";
import {
  clientFor,
  describeError,
  forgetCredential,
  isRefusedCredential,
  saveCredential,
  savedCredential,
  type Credential,
} from "./api.js";
import { h } from "./dom.js";
import {
  ANY,
  filterOf,
  listMemories,
  memoryForm,
  memoryList,
  searchView,
  type MemoryQuery,
} from "./memory.js";
import { historyOfSession, playgroundForm, requestOf, resultView } from "./playground.js";
import { listSessions, readEvents, sessionPage, sessionsPage } from "./sessions.js";
import { listMessages, turnPage } from "./turn.js";

const view = document.getElementById("view") as HTMLElement;
const status = document.getElementById("status") as HTMLElement;
const account = document.getElementById("account") as HTMLElement;
let memoryQuery: MemoryQuery = { agent: ANY, app: ANY, metadata: "", asOf: "", search: "" };

function show(...nodes: (Node | null)[]): void {
  view.replaceChildren(...nodes.filter((n): n is Node => n !== null));
}

function fail(error: unknown): void {
  status.replaceChildren(h("p", { class: "error", role: "alert" }, describeError(error)));
  if (isRefusedCredential(error)) {
    forgetCredential();
    renderAccount(undefined);
    show(signIn());
  }
}

// Each route (and each new memory query) takes a number; a view whose calls end after a
// newer one started is dropped, so a slow answer never replaces the page asked for since.
let routing = 0;

/** Shows a finished view, unless a newer route started while it loaded. */
function paint(mine: number, route: string, ...nodes: (Node | null)[]): void {
  if (mine !== routing) {
    return;
  }
  show(...nodes);
  ready(route);
}

function ready(route: string): void {
  view.dataset.ready = route;
  performance.mark(`inspect:${route}`);
}

function signIn(): HTMLElement {
  return h(
    "form",
    {
      class: "sign-in",
      id: "sign-in",
      onsubmit: (e: Event) => {
        e.preventDefault();
        const data = new FormData(e.target as HTMLFormElement);
        const credential = {
          key: String(data.get("key") ?? "").trim(),
          user: String(data.get("user") ?? "").trim(),
        };
        saveCredential(credential);
        renderAccount(credential);
        status.replaceChildren();
        void route();
      },
    },
    h("h1", {}, "Sign in"),
    h(
      "p",
      {},
      "The key or token is kept in this tab only (session storage) and sent with every call; the server shows what it allows: a user's key its own data, a service key its tenant's users.",
    ),
    h(
      "label",
      { for: "key" },
      "API key or token",
      h("input", { id: "key", name: "key", type: "password", autocomplete: "off" }),
    ),
    h(
      "label",
      { for: "user" },
      "user id (for a service key, or a server without authentication)",
      h("input", { id: "user", name: "user", autocomplete: "off" }),
    ),
    h("button", { type: "submit" }, "Open"),
  );
}

function renderAccount(credential: Credential | undefined): void {
  account.replaceChildren(
    credential
      ? h(
          "span",
          {},
          credential.user
            ? `user ${credential.user} `
            : credential.key
              ? "signed in with a key "
              : "",
          h(
            "button",
            {
              type: "button",
              id: "sign-out",
              onclick: () => {
                forgetCredential();
                renderAccount(undefined);
                location.hash = "#/sessions";
                show(signIn());
              },
            },
            "Sign out",
          ),
        )
      : "",
  );
}

async function route(): Promise<void> {
  const credential = savedCredential();
  delete view.dataset.ready;
  if (credential === undefined) {
    show(signIn());
    ready("sign-in");
    return;
  }
  const client = clientFor(credential);
  const mine = ++routing;
  show(h("p", { class: "loading" }, "Loading…"));
  try {
    const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
    // A malformed escape in a pasted link throws URIError, shown like any other failure.
    const parts = (path ?? "").split("/").filter(Boolean).map(decodeURIComponent);
    const current = !parts[0] || parts[0] === "session" ? "sessions" : parts[0];
    for (const link of document.querySelectorAll<HTMLAnchorElement>("nav a")) {
      if (link.hash === `#/${current}`) {
        link.setAttribute("aria-current", "page");
      } else {
        link.removeAttribute("aria-current");
      }
    }
    await render(client, credential.user, parts, new URLSearchParams(query), mine);
    if (mine === routing) {
      status.replaceChildren();
    }
  } catch (error) {
    if (mine !== routing) {
      return;
    }
    show(null);
    fail(error);
    ready("error");
  }
}

async function render(
  client: ContextdClient,
  user: string,
  parts: string[],
  query: URLSearchParams,
  mine: number,
): Promise<void> {
  const [page, id, sub, turn] = parts;
  if (page === "session" && id !== undefined && sub === "turn" && turn !== undefined) {
    const [events, messages] = await Promise.all([
      readEvents(client, user, id),
      listMessages(client, user, id),
    ]);
    paint(mine, "turn", turnPage(id, Number(turn), events, messages));
  } else if (page === "session" && id !== undefined) {
    const [session, events] = await Promise.all([
      client.sessions.getSession({ userId: user, sessionId: id }),
      readEvents(client, user, id),
    ]);
    paint(mine, "session", sessionPage(session.session!, events));
  } else if (page === "memory") {
    await renderMemory(client, user, mine);
  } else if (page === "playground") {
    const listed = await client.context.listTokenizers({});
    const names = listed.tokenizers.filter((t) => t.available).map((t) => t.name);
    const choices = [
      listed.defaultTokenizer,
      ...names.filter((n) => n !== listed.defaultTokenizer),
    ];
    const result = h("div", { id: "result", "aria-live": "polite" });
    const form = playgroundForm(
      choices,
      listed.defaultTokenizer,
      (data) => {
        try {
          const request = requestOf(data);
          client.context
            .buildMessages(request)
            .then((built) => {
              result.replaceChildren(resultView(request, built));
              status.replaceChildren();
              ready("built");
            })
            .catch(fail);
        } catch (error) {
          fail(error);
        }
      },
      (sessionId) => {
        historyOfSession(client, user, sessionId)
          .then((history) => {
            (document.getElementById("history") as HTMLTextAreaElement).value = JSON.stringify(
              history,
              null,
              1,
            );
            status.replaceChildren();
            ready("loaded");
          })
          .catch(fail);
      },
    );
    paint(
      mine,
      "playground",
      h("section", { class: "playground" }, h("h1", {}, "Playground"), form, result),
    );
  } else {
    const q = query.get("q") ?? "";
    const sessions = await listSessions(client, user);
    paint(
      mine,
      "sessions",
      sessionsPage(sessions, q, (next) => {
        history.replaceState(
          null,
          "",
          next ? `#/sessions?q=${encodeURIComponent(next)}` : "#/sessions",
        );
      }),
    );
  }
}

async function renderMemory(client: ContextdClient, user: string, mine: number): Promise<void> {
  const filter = filterOf(memoryQuery);
  const [memories, searched] = await Promise.all([
    listMemories(client, user, filter),
    memoryQuery.search
      ? client.memory.searchMemories({
          userId: user,
          query: memoryQuery.search,
          limit: 20,
          filter,
          explain: true,
        })
      : undefined,
  ]);
  const apply = (next: MemoryQuery) => {
    memoryQuery = next;
    renderMemory(client, user, ++routing).catch(fail);
  };
  paint(
    mine,
    searched ? "searched" : "memory",
    h(
      "section",
      { class: "memory" },
      h("h1", {}, "Memory"),
      memoryForm(memoryQuery, apply),
      searched ? searchView(searched.results, searched.note) : null,
      h("h2", {}, `${memories.length} memories`),
      memoryList(client, user, memories, fail),
    ),
  );
}

renderAccount(savedCredential());
window.addEventListener("hashchange", () => void route());
void route();
