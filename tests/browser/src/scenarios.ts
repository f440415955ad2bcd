// What the add-in page does against contextd. Each scenario only drives the calls and
// feeds ids from one answer into the next; the recorder keeps what came back, and the
// Python test judges it.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";

import { ChatService } from "./gen/contextd/v1/chat_pb";
import {
  ContextService,
  MemoryMode,
  OutputFormat,
  Role,
  type SessionContextSchema,
} from "./gen/contextd/v1/context_pb";
import { MemoryService } from "./gen/contextd/v1/memory_pb";
import { PromptService } from "./gen/contextd/v1/prompts_pb";
import { SessionService } from "./gen/contextd/v1/sessions_pb";
import { UserService } from "./gen/contextd/v1/users_pb";

export interface Clients {
  context: Client<typeof ContextService>;
  chat: Client<typeof ChatService>;
  sessions: Client<typeof SessionService>;
  memories: Client<typeof MemoryService>;
  prompts: Client<typeof PromptService>;
  users: Client<typeof UserService>;
}

export function clients(transport: Transport): Clients {
  return {
    context: createClient(ContextService, transport),
    chat: createClient(ChatService, transport),
    sessions: createClient(SessionService, transport),
    memories: createClient(MemoryService, transport),
    prompts: createClient(PromptService, transport),
    users: createClient(UserService, transport),
  };
}

/** Runs `call`, which must fail, and returns its error. */
async function expectError(call: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await call();
  } catch (reason) {
    return ConnectError.from(reason);
  }
  throw new Error("the call succeeded but should have failed");
}

async function drain(events: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of events) {
    // the recorder keeps every event
  }
}

/** Every RPC of every service, in an order where each call can use what earlier ones stored. */
export async function tour(c: Clients, user: string): Promise<void> {
  const scenario = `trip-planner-${user}`;
  const skill = `cite-pages-${user}`;

  await c.context.listTokenizers({});
  await c.context.countTokens({
    tokenizer: "cl100k_base",
    texts: ["Hello, world!", "你好，世界"],
    messages: [{ role: Role.USER, content: "Hello, world!" }],
  });
  await c.context.assemblePrompt({
    layers: {
      identity: "You are Ada, a travel assistant.",
      rules: "Answer in English.",
      mode: "  ",
      context: "Today is May 1.",
    },
    tokenizer: "estimate",
  });
  await c.context.buildMessages({
    systemPrompts: ["You are a travel assistant."],
    history: [
      { role: Role.USER, content: "I want to visit Portugal." },
      { role: Role.ASSISTANT, content: "Lisbon and Porto are good starts." },
      { role: Role.USER, content: "Which one has the best food?" },
      { role: Role.ASSISTANT, content: "Both. Porto for francesinha." },
    ],
    userMessage: "Book me a table.",
    tokenBudget: 30,
    tokenizer: "estimate",
    outputFormat: OutputFormat.OPENAI,
  });

  await c.prompts.upsertTemplate({ scenario, systemPrompt: "You help plan trips to {{city}}." });
  await c.prompts.upsertSkill({
    skill: {
      name: skill,
      description: "Cites document pages",
      prompt: "Cite the page of {{document}} you rely on.",
      apps: ["word"],
      enabled: true,
    },
  });
  await c.prompts.listTemplates({});
  await c.prompts.listSkills({ app: "word", enabledOnly: true });

  const { session } = await c.sessions.createSession({
    userId: user,
    scenario,
    host: "word",
    title: "Trip to Lisbon",
    metadata: { document: "itinerary.docx" },
  });
  const sessionId = session?.id ?? "";
  await c.sessions.getSession({ userId: user, sessionId });
  const appended = await c.sessions.appendMessages({
    userId: user,
    sessionId,
    messages: [
      { role: Role.USER, content: "I want to visit Portugal." },
      { role: Role.ASSISTANT, content: "Lisbon and Porto are good starts." },
    ],
  });
  const ids = appended.messages.map((stored) => stored.message?.id ?? "");
  await c.sessions.addCompressionSummary({
    userId: user,
    sessionId,
    messageIds: ids,
    startMessageId: ids[0],
    summary: "The user plans a trip to Portugal.",
  });
  await c.sessions.setSessionSummary({ userId: user, sessionId, summary: "Portugal trip" });

  await c.memories.addMemory({ userId: user, content: "I live in Lisbon." });
  await c.memories.addMemory({ userId: user, content: "I live in Lisbon." });
  const { memory: passing } = await c.memories.addMemory({
    userId: user,
    content: "I am flying on Tuesday.",
  });
  await c.memories.updateMemory({
    userId: user,
    memoryId: passing?.id ?? "",
    memory: { content: "I am flying on Wednesday." },
    updateMask: { paths: ["content"] },
  });
  await c.memories.listMemoryHistory({ userId: user, memoryId: passing?.id ?? "" });
  await c.memories.deleteMemory({ userId: user, memoryId: passing?.id ?? "" });
  await c.memories.searchMemories({ userId: user, query: "Lisbon", limit: 5 });
  await c.memories.listMemories({ userId: user, pageSize: 10 });

  const context: MessageInitShape<typeof SessionContextSchema> = {
    userId: user,
    sessionId,
    scenario,
    host: "word",
    variables: { city: "Lisbon", document: "itinerary.docx" },
    memory: MemoryMode.ON,
  };
  await c.context.buildMessages({
    session: context,
    userMessage: "Where do I start in Lisbon?",
    tokenBudget: 2000,
    tokenizer: "estimate",
    outputFormat: OutputFormat.ANTHROPIC,
  });

  let answerId = "";
  const turn = { session: context, userMessage: "What should I see first in Lisbon?" };
  for await (const event of c.chat.streamChat(turn)) {
    if (event.event.case === "turnCompleted") {
      answerId = event.event.value.assistantMessageId;
    }
  }
  await c.sessions.listMessages({ userId: user, sessionId, pageSize: 50 });
  await c.context.collect({ userId: user, messageId: answerId, remember: true });
  await drain(c.sessions.exportEvents({ userId: user, sessionId }));
  await c.sessions.endSession({ userId: user, sessionId, mode: "taskpane" });
  await c.sessions.listSessions({ userId: user, pageSize: 10 });

  await expectError(() =>
    c.context.buildMessages({
      history: [
        {
          role: Role.ASSISTANT,
          toolCalls: [{ id: "call-1", name: "look up", arguments: "{}" }],
        },
      ],
      userMessage: "hello",
      tokenBudget: -5,
    }),
  );

  await c.prompts.deleteTemplate({ scenario });
  await c.prompts.deleteSkill({ name: skill });
  await c.prompts.listTemplates({});
  await c.sessions.deleteSession({ userId: user, sessionId });
  await expectError(() => c.sessions.getSession({ userId: user, sessionId }));
  await c.users.deleteUser({ userId: user, confirmUserId: user });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A chat turn the page aborts after the first text delta, as a task pane does when the
 * user presses Stop; the server then stores the partial answer as cancelled. */
export async function abortedTurn(c: Clients, user: string): Promise<void> {
  const stop = new AbortController();
  let sessionId = "";
  const turn = { session: { userId: user }, userMessage: "Tell me a long story." };
  const aborted = await expectError(async () => {
    for await (const event of c.chat.streamChat(turn, { signal: stop.signal })) {
      if (event.event.case === "turnStarted") {
        sessionId = event.event.value.sessionId;
      } else if (event.event.case === "textDelta") {
        stop.abort();
      }
    }
  });
  if (aborted.code !== Code.Canceled) {
    throw aborted;
  }
  // The server notices the closed response and stores the partial answer shortly after.
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { messages } = await c.sessions.listMessages({ userId: user, sessionId });
    if (messages.some((stored) => stored.status === "cancelled")) {
      return;
    }
    await sleep(100);
  }
  throw new Error("the cancelled answer was not stored within 10 s");
}

/** From an origin the server does not allow: every call must fail, and none may store. */
export async function refusedOrigin(c: Clients, user: string): Promise<void> {
  await expectError(() => c.sessions.createSession({ userId: user, title: "Not allowed" }));
  await expectError(() => c.memories.addMemory({ userId: user, content: "I live in Porto." }));
}

/**
 * For a server started with --auth api-key: with a bearer token the token's user is the
 * caller, so no request names a user; without one every call must fail UNAUTHENTICATED.
 * Failures are recorded, not thrown, so both runs record the same three calls.
 */
export async function signedIn(c: Clients, _user: string): Promise<void> {
  let sessionId = "";
  await settle(async () => {
    const { session } = await c.sessions.createSession({ title: "Signed in" });
    sessionId = session?.id ?? "";
  });
  await settle(() =>
    drain(c.chat.streamChat({ session: { sessionId }, userMessage: "Who am I?" })),
  );
  await settle(() => c.sessions.listSessions({}));
}

async function settle(call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch {
    // the recorder kept the error
  }
}
