// One StreamChat call over the Connect protocol with JSON, on contextd's web port, with
// nothing but fetch: no generated code and no bundler. A server-streaming Connect call
// is a POST whose body and answer are envelopes: a flags byte, the message's length
// (4 bytes, big-endian), then the message; the answer's last envelope is flagged 0x02
// and carries the call's error, if any.

export interface StreamChatRequest {
  session: { userId: string; sessionId?: string };
  userMessage: string;
}

/** One event of the answer, in the protobuf JSON mapping (camelCase, enum names). */
export type ChatEvent =
  | { turnStarted: { sessionId: string; turnIndex: number } }
  | { textDelta: { text: string } }
  | { usage: Record<string, unknown> }
  | { toolCall: Record<string, unknown> }
  | { turnCompleted: { status: string; finalText?: string; errorMessage?: string } };

export class ConnectError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

const END_STREAM = 0x02;

function envelope(message: unknown): Uint8Array<ArrayBuffer> {
  const json = new TextEncoder().encode(JSON.stringify(message));
  const frame = new Uint8Array(5 + json.length);
  new DataView(frame.buffer).setUint32(1, json.length);
  frame.set(json, 5);
  return frame;
}

/**
 * The turn's events as they arrive. `webAddress` is the web port's URL
 * (`http://127.0.0.1:50152`); aborting `signal` cancels the turn, and contextd stores
 * the partial answer as cancelled.
 */
export async function* streamChat(
  webAddress: string,
  request: StreamChatRequest,
  signal?: AbortSignal,
): AsyncGenerator<ChatEvent> {
  const response = await fetch(`${webAddress}/contextd.v1.ChatService/StreamChat`, {
    method: "POST",
    headers: { "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1" },
    body: envelope(request),
    signal,
  });
  if (!response.ok || response.body === null) {
    throw new ConnectError(`http ${response.status}`, await response.text());
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = new Uint8Array(0);
  for (;;) {
    // Whole envelopes first; the network may cut them anywhere.
    while (buffered.length >= 5) {
      const size = new DataView(buffered.buffer, buffered.byteOffset).getUint32(1);
      if (buffered.length < 5 + size) break;
      const flags = buffered[0] ?? 0;
      const message: unknown = JSON.parse(decoder.decode(buffered.subarray(5, 5 + size)));
      buffered = buffered.subarray(5 + size);
      if (flags & END_STREAM) {
        const { error } = message as { error?: { code: string; message?: string } };
        if (error) throw new ConnectError(error.code, error.message ?? "");
        return;
      }
      yield message as ChatEvent;
    }
    const { done, value } = await reader.read();
    if (done) throw new ConnectError("unavailable", "the answer ended without its end of stream");
    const joined = new Uint8Array(buffered.length + value.length);
    joined.set(buffered);
    joined.set(value, buffered.length);
    buffered = joined;
  }
}
