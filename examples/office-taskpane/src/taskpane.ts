// The task pane: a message box, a Send and a Stop button, and the answer as it streams.
// The server address and user come from the page's query (?endpoint=...&user=...), as an
// add-in's manifest would set them; a real add-in takes the user from its sign-in.
import { streamChat } from "./stream_chat.js";

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page has no #${id}`);
  return found as T;
}

async function send(endpoint: string, user: string, stop: AbortController): Promise<void> {
  const message = element<HTMLTextAreaElement>("message").value;
  const answer = element<HTMLElement>("answer");
  const status = element<HTMLElement>("status");
  answer.textContent = "";
  status.textContent = "streaming";
  try {
    const request = { session: { userId: user }, userMessage: message };
    for await (const event of streamChat(endpoint, request, stop.signal)) {
      if ("textDelta" in event) answer.textContent += event.textDelta.text;
      if ("turnCompleted" in event) status.textContent = event.turnCompleted.status;
    }
  } catch (error) {
    status.textContent = stop.signal.aborted ? "cancelled" : String(error);
  }
}

Office.onReady(() => {
  const query = new URLSearchParams(location.search);
  const endpoint = query.get("endpoint") ?? "http://127.0.0.1:50152";
  const user = query.get("user") ?? Office.context.mailbox?.userProfile.emailAddress ?? "example";
  let stop = new AbortController();
  element<HTMLButtonElement>("send").onclick = () => {
    stop = new AbortController();
    void send(endpoint, user, stop);
  };
  element<HTMLButtonElement>("stop").onclick = () => stop.abort();
});
