"""Prompt caching: the input tokens a 25-turn conversation bills uncached, by cache layout.

One real server (a child process, its own SQLite file) and two users that live the
same conversation: 25 turns of one session each, a new memory every third turn and
a new summarized recent session every fifth, so the memory and recent_sessions
layers change as they do in use. Each turn builds its prompt with session-mode
BuildMessages (default budget room, nothing trimmed), one user with the default
layout, the other with ``cache_layout = STABLE_PREFIX``; the turn's question and
answer are then stored.

A provider's prompt cache serves the longest prefix a turn shares with the turn
before; the rest is billed as plain input. Per turn: the prompt's tokens minus the
tokens of that shared prefix (whole messages that are equal, plus the common
leading text of the first one that is not, counted with the server's tokenizer).
The ratio is default over stable prefix: how many times fewer uncached tokens the
layout leaves. Run: ``python bench/prompt_cache.py [--quick]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

import grpc
from _common import long_history, machine_note, print_table, result_line
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb
from session_build import spawn

NAME = "prompt_cache"
TARGET = 2.0
BUDGET = 32_000
TOKENIZER = "cl100k_base"
LAYOUTS = {"default": pb.CACHE_LAYOUT_OFF, "stable_prefix": pb.CACHE_LAYOUT_STABLE_PREFIX}


class Conversation:
    """One user's session, its memories and other sessions, turn by turn."""

    def __init__(self, channel: grpc.Channel, user: str, layout: pb.CacheLayout) -> None:
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self.user, self.layout = user, layout
        self.session_id = self._new_session("Current work")
        self.previous: list[pb.Message] = []
        self.prompt_tokens = self.uncached_tokens = 0

    def _new_session(self, title: str) -> str:
        request = spb.CreateSessionRequest(user_id=self.user, title=title)
        session_id: str = self.sessions.CreateSession(request).session.id
        return session_id

    def change_memory(self, turn: int, question: str) -> None:
        """What changes between turns besides the history: memories, recent sessions."""
        if turn % 3 == 0:
            fact = f"The user asked about this before: {question}"
            self.memory.AddMemory(memory_pb2.AddMemoryRequest(user_id=self.user, content=fact))
        if turn % 5 == 0:
            other = self._new_session(f"Side project {turn}")
            self.sessions.SetSessionSummary(
                spb.SetSessionSummaryRequest(
                    user_id=self.user, session_id=other, summary=f"Reviewed pull request {turn}"
                )
            )

    def turn(self, question: str, answer: str) -> None:
        built = self.context.BuildMessages(
            pb.BuildMessagesRequest(
                user_message=question,
                token_budget=BUDGET,
                tokenizer=TOKENIZER,
                session=pb.SessionContext(
                    user_id=self.user, session_id=self.session_id, cache_layout=self.layout
                ),
            )
        )
        assert not built.report.dropped, "the budget must keep the whole conversation"
        messages = list(built.messages)
        self.prompt_tokens += built.report.total_tokens
        self.uncached_tokens += built.report.total_tokens - self._shared(messages)
        self.previous = messages
        self.sessions.AppendMessages(
            spb.AppendMessagesRequest(
                user_id=self.user,
                session_id=self.session_id,
                messages=[
                    pb.Message(role=pb.ROLE_USER, content=question),
                    pb.Message(role=pb.ROLE_ASSISTANT, content=answer),
                ],
            )
        )

    def _shared(self, messages: Sequence[pb.Message]) -> int:
        """Tokens of the prefix ``messages`` shares with the previous turn's prompt."""
        shared = 0
        for old, new in zip(self.previous, messages, strict=False):
            if old.role == new.role and old.content == new.content:
                shared += new.tokens
                continue
            if old.role == new.role:
                common = _common_prefix(old.content, new.content)
                if common:
                    counted = self.context.CountTokens(
                        pb.CountTokensRequest(tokenizer=TOKENIZER, texts=[common])
                    )
                    shared += counted.total_tokens
            break
        return shared


def _common_prefix(a: str, b: str) -> str:
    n = min(len(a), len(b))
    end = next((i for i in range(n) if a[i] != b[i]), n)
    return a[:end]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns, a smoke test")
    args = parser.parse_args()
    turns = 8 if args.quick else 25
    script = long_history(2 * turns, seed=25)
    print(machine_note())
    with TemporaryDirectory(prefix="contextd-bench-") as tmp:
        process, address = spawn(Path(tmp))
        try:
            with grpc.insecure_channel(address) as channel:
                conversations = {
                    name: Conversation(channel, f"bench-{name}", layout)
                    for name, layout in LAYOUTS.items()
                }
                for k in range(turns):
                    question, answer = script[2 * k][1], script[2 * k + 1][1]
                    for conversation in conversations.values():
                        conversation.change_memory(k + 1, question)
                        conversation.turn(question, answer)
        finally:
            process.terminate()
            process.wait(15)
    default, stable = conversations["default"], conversations["stable_prefix"]
    ratio = default.uncached_tokens / max(stable.uncached_tokens, 1)
    print(
        f"{NAME}: {turns} turns of one session ({TOKENIZER}), a new memory every 3rd turn, "
        "a new recent session every 5th"
    )
    print_table(
        ["cache_layout", "prompt tokens", "uncached input tokens", "uncached share"],
        [
            (
                name,
                str(c.prompt_tokens),
                str(c.uncached_tokens),
                f"{c.uncached_tokens / c.prompt_tokens:.0%}",
            )
            for name, c in conversations.items()
        ],
    )
    print(f"default / stable_prefix uncached input tokens: {ratio:.2f}x")
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
