"""Context editing: what a 100-step tool-using agent session sends and is billed.

One contextd server (a child process, ``--provider openai`` pointed at the fake of
_agent_session.py, ``--max-prompt-tokens 200000``, memory off) and one agent session per
side: a question, then 100 steps of search results of 1-5k tokens (and, every 25th step,
a fetched page of about 20k), some of which the model needs again later. The host runs
each tool and continues the turn with StreamChat (session mode, the stable-prefix cache
layout, token budget 100,000, cl100k_base); the fake's scripted model calls the next tool
until it answers. The sides differ only in the request's ``editing``:

- none: no editing (the budget trims the oldest messages once the session is over it);
- capping: ``tool_result_cap_tokens`` 1500;
- clearing: ``clear_trigger_tokens`` 15000, ``keep_tool_results`` 3,
  ``clear_at_least_tokens`` 6000; and the same with ``clear_at_least_tokens`` 0;
- both: capping and clearing (and both with ``clear_at_least_tokens`` 0);
- LangChain: the same session kept by the host as LangChain messages, trimmed to the
  same budget by ``trim_messages`` (strategy last, contextd's per-message count) and sent
  to the fake directly; it has no recall tool, so a needed result that was trimmed away
  is fetched again with its tool.

The fake bills every request as a prompt cache would (see _agent_session.py): input
tokens sent, read from the cache, written to it, and uncached; billed = uncached +
written. Token counts, not time: the figures do not move with the machine's load.
**RESULT ratio = input tokens without editing ÷ with both** (target 5: at least 80 %
fewer); PASS also needs fewer billed tokens with both than without editing, and with
clearing (alone and with capping) than with the same clearing without
``clear_at_least_tokens``. Run: ``python bench/context_editing.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
from _agent_session import STEPS, FakeProvider, again_result, tool_result
from _common import machine_note, print_table, result_line
from contextd.core.tokens import TokenizerRegistry
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc
from contextd.v1 import context_pb2 as pb
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

NAME = "context_editing"
TARGET = 5.0
BUDGET = 100_000
TASK = "Research how our storage layer behaves under load and summarize the findings."
SYSTEM = "You are a helpful assistant."  # the server's --system-identity, for the peer
CAP = 1500
TRIGGER, KEEP = 15_000, 3


def editing(cap: int, at_least: int) -> pb.ContextEditing:
    return pb.ContextEditing(
        tool_result_cap_tokens=cap,
        clear_trigger_tokens=TRIGGER if at_least >= 0 else 0,
        keep_tool_results=KEEP,
        clear_at_least_tokens=max(at_least, 0),
    )


# at_least -1: no clearing.
SIDES: dict[str, pb.ContextEditing | None] = {
    "none": None,
    "capping": editing(CAP, -1),
    "clearing": editing(0, 6000),
    "clearing, clear_at_least 0": editing(0, 0),
    "both": editing(CAP, 6000),
    "both, clear_at_least 0": editing(CAP, 0),
}
FAKE_KEY = "sk-bench-not-a-key"  # the fake provider takes any key
TOOLS = [
    cpb.ToolDefinition(name="search", description="Search the documentation"),
    cpb.ToolDefinition(name="fetch", description="Fetch a page"),
]


@dataclass
class Totals:
    requests: int = 0
    tokens: int = 0
    read: int = 0
    written: int = 0
    uncached: int = 0
    edits: int = 0

    @property
    def billed(self) -> int:
        return self.uncached + self.written


def totals(fake: FakeProvider, edits: int = 0) -> Totals:
    out = Totals(requests=len(fake.bills), edits=edits)
    for b in fake.bills:
        out.tokens += b.tokens
        out.read += b.read
        out.written += b.written
        out.uncached += b.uncached
    return out


def result_of(call_id: str) -> str:
    again = again_result(call_id)
    return again if again is not None else tool_result(int(call_id.split("_")[1]))


async def contextd_side(
    stub: chat_pb2_grpc.ChatServiceStub, editing: pb.ContextEditing | None, user: str
) -> int:
    """The session through StreamChat; the edits the last context reported."""
    session = pb.SessionContext(
        user_id=user, cache_layout=pb.CACHE_LAYOUT_STABLE_PREFIX, memory=pb.MEMORY_MODE_OFF
    )
    request = cpb.StreamChatRequest(
        session=session,
        user_message=TASK,
        tools=TOOLS,
        tokenizer="cl100k_base",
        token_budget=BUDGET,
        editing=editing,
    )
    edits = 0
    while True:
        events = [e async for e in stub.StreamChat(request)]
        started, done = events[0].turn_started, events[-1].turn_completed
        edits = len(started.context.edits)
        if done.status != cpb.TURN_STATUS_REQUIRES_ACTION:
            assert done.status == cpb.TURN_STATUS_OK, done.error_message
            return edits
        session.session_id = started.session_id
        results = [
            cpb.ToolResult(tool_call_id=c.id, content=result_of(c.id))
            for c in done.pending_tool_calls
        ]
        request = cpb.StreamChatRequest(
            session=session,
            tools=TOOLS,
            tool_results=results,
            tokenizer="cl100k_base",
            token_budget=BUDGET,
            editing=editing,
        )


def langchain_side(fake: FakeProvider) -> None:
    """The session kept as LangChain messages and trimmed by ``trim_messages``."""
    tok = TokenizerRegistry().get("cl100k_base")

    def count(messages: list[BaseMessage]) -> int:
        total = 0
        for m in messages:
            total += tok.message_overhead + tok.count(str(m.content))
            for c in getattr(m, "tool_calls", None) or ():
                total += tok.count(c["name"]) + tok.count(json.dumps(c["args"]))
        return total

    history: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(TASK)]
    while True:
        kept = trim_messages(
            history,
            max_tokens=BUDGET,
            strategy="last",
            token_counter=count,
            include_system=True,
            start_on=("human", "ai"),
        )
        step = fake.answer([_openai(m) for m in kept])
        if isinstance(step, str):
            return
        call_id, name, arguments = step
        call = {"id": call_id, "name": name, "args": json.loads(arguments)}
        history.append(AIMessage("", tool_calls=[call]))
        history.append(ToolMessage(result_of(call_id), tool_call_id=call_id))


def _openai(m: BaseMessage) -> dict[str, Any]:
    """A LangChain message as the Chat Completions message contextd would send."""
    if isinstance(m, SystemMessage):
        return {"role": "system", "content": m.content}
    if isinstance(m, HumanMessage):
        return {"role": "user", "content": m.content}
    if isinstance(m, ToolMessage):
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    assert isinstance(m, AIMessage)
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for c in m.tool_calls
    ]
    return {"role": "assistant", "content": m.content or None, "tool_calls": calls}


def spawn_contextd(data_dir: Path, fake_port: int) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    env["CONTEXTD_OPENAI_API_KEY"] = FAKE_KEY
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir)]
    command += ["--provider", "openai", "--provider-base-url", f"http://127.0.0.1:{fake_port}/v1"]
    command += ["--max-prompt-tokens", "200000", "--max-message-bytes", str(256 * 2**20)]
    command += ["--memory-enabled", "false", "--default-tokenizer", "cl100k_base"]
    process = subprocess.Popen(
        [*command, "--log-level", "INFO"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    for line in process.stderr:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "listening":
            address = str(entry["address"])
            break
    else:
        raise RuntimeError("contextd exited before listening")
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, address


async def measure(steps: int) -> dict[str, Totals]:
    fake = FakeProvider(steps)
    await fake.start()
    out: dict[str, Totals] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
            process, address = spawn_contextd(Path(tmp), fake.port)
            try:
                options = [("grpc.max_receive_message_length", 256 * 2**20)]
                async with grpc.aio.insecure_channel(address, options=options) as channel:
                    stub = chat_pb2_grpc.ChatServiceStub(channel)
                    for k, (name, editing) in enumerate(SIDES.items()):
                        fake.reset()
                        edits = await contextd_side(stub, editing, f"agent-{k}")
                        out[name] = totals(fake, edits)
            finally:
                process.terminate()
                process.wait(30)
    finally:
        await fake.stop()
    fake.reset()
    await asyncio.to_thread(langchain_side, fake)
    out["LangChain trim_messages"] = totals(fake)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 steps instead of 100")
    args = parser.parse_args()
    steps = 30 if args.quick else STEPS
    print(machine_note())
    print(f"{steps} steps, budget {BUDGET}, tokens of cl100k_base\n")
    measured = asyncio.run(measure(steps))
    none = measured["none"]
    rows = []
    for name, t in measured.items():
        rows.append(
            [
                name,
                str(t.requests),
                f"{t.tokens:,}",
                f"{1 - t.tokens / none.tokens:.0%}",
                f"{t.read:,}",
                f"{t.written:,}",
                f"{t.uncached:,}",
                f"{t.billed:,}",
                f"{t.billed / none.billed:.2f}",
            ]
        )
    headers = ["side", "requests", "input", "fewer", "cache read", "written", "uncached"]
    print_table([*headers, "billed", "billed ÷ none"], rows)
    both = measured["both"]
    ratio = none.tokens / both.tokens
    fewer_billed = (
        both.billed < none.billed
        and measured["clearing"].billed < measured["clearing, clear_at_least 0"].billed
        and both.billed < measured["both, clear_at_least 0"].billed
    )
    print()
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET and fewer_billed))


if __name__ == "__main__":
    main()
