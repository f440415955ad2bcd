// One chat turn through contextd with @contextd/client, printed as it streams.
//
//   node chat.mjs [ADDRESS] [MESSAGE]
//
// ADDRESS defaults to $CONTEXTD_ADDRESS, else 127.0.0.1:50151 (where `make run` listens).
// With a server started as `contextd serve --echo-delay-ms 80` the answer arrives word
// by word; Ctrl-C mid-answer cancels the turn through an AbortSignal, and contextd keeps
// what was said so far, marked cancelled.
import { ContextdClient, TurnStatus } from "@contextd/client";

const address = process.argv[2] ?? process.env.CONTEXTD_ADDRESS ?? "127.0.0.1:50151";
const message = process.argv[3] ?? "Hello! What do you see?";

// No deadline: a real model's answer may take a while.
const client = new ContextdClient(address, { timeoutMs: null });
const stop = new AbortController();
process.once("SIGINT", () => stop.abort());
try {
  const events = client.chat.streamChat(
    { session: { userId: "example" }, userMessage: message },
    { signal: stop.signal },
  );
  for await (const { event } of events) {
    switch (event.case) {
      case "turnStarted":
        console.log(`[session ${event.value.sessionId}, turn ${event.value.turnIndex}]`);
        break;
      case "textDelta":
        process.stdout.write(event.value.text);
        break;
      case "turnCompleted":
        console.log(`\n[${TurnStatus[event.value.status]}]`);
        break;
    }
  }
} catch (error) {
  if (!stop.signal.aborted) throw error;
  console.log("\n[cancelled]");
  process.exitCode = 130;
} finally {
  client.close();
}
