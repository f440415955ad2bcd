"""Hypothesis strategies for build requests: tool calls, blanks, summaries, budgets."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace

from contextd.core.build_request import BuildRequest, OverflowPolicy
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.prompt import PromptLayers
from contextd.core.tokens import Tokenizer, TokenizerRegistry, message_tokens
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.support.build_reference import (
    repair_reference,
    required_messages,
)

REGISTRY = TokenizerRegistry()


TOKENIZERS: dict[str, Tokenizer] = {n: REGISTRY.get(n) for n in ("estimate", "cl100k_base")}


PROPERTY_SETTINGS = settings(
    max_examples=300,  # the main property below runs twice as many
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


BLANKS = st.sampled_from(["", " ", "  ", "\n", "\t", " \n\t ", "\u3000", "\u00a0"])


WORDS = st.one_of(
    st.text(alphabet="abcdefghij XYZ.,!?0123", min_size=1, max_size=40),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.sampled_from(["林默是28岁侦探", "héllo wörld", "🙂 ok", '{"json": true}']),
)


TEXTS = st.one_of(BLANKS, WORDS, WORDS)  # blank about a third of the time


NONBLANK = WORDS.filter(lambda s: bool(s.strip()))


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


JSON_OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=3)


ARGUMENTS = st.one_of(
    st.sampled_from(["", "  ", "{}", " {} "]),
    st.builds(json.dumps, JSON_OBJECTS),
    st.builds(lambda o: json.dumps(o, indent=2, ensure_ascii=False), JSON_OBJECTS),
)


TOOL_NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)


# A call id is PREFIX_N with N from one counter per history, so ids never repeat.
ID_PREFIXES = st.from_regex(r"[A-Za-z0-9_-]{1,16}", fullmatch=True)


def _tool_calls(
    draw: st.DrawFn, counter: Iterator[int], low: int, high: int
) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(f"{draw(ID_PREFIXES)}_{next(counter)}", draw(TOOL_NAMES), draw(ARGUMENTS))
        for _ in range(draw(st.integers(low, high)))
    )


@st.composite
def histories(draw: st.DrawFn, end_with_tool_results: bool = False) -> list[ChatMessage]:
    counter = itertools.count()
    msgs: list[ChatMessage] = []
    late: list[ChatMessage] = []  # results held back to land after some later message
    if draw(st.integers(0, 3)):  # conversations mostly open with the user
        msgs.append(ChatMessage(Role.USER, draw(NONBLANK)))
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "user", "assistant", "late", "ghost"]))
        if kind == "user":
            msgs.append(ChatMessage(Role.USER, draw(TEXTS)))
        elif kind == "assistant":
            calls = _tool_calls(draw, counter, 0, 3)
            msgs.append(ChatMessage(Role.ASSISTANT, draw(TEXTS), calls))
            results: list[ChatMessage] = []
            for call in calls:
                fate = draw(
                    st.sampled_from(
                        ["answer"] * 4 + ["missing", "twice", "late", "late", "again_late"]
                    )
                )
                result = ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=call.id)
                if fate == "answer":
                    results.append(result)
                elif fate == "twice":
                    results += [result, ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=call.id)]
                elif fate == "late":
                    late.append(result)
                elif fate == "again_late":  # in place, and a second result after a later message
                    results.append(result)
                    late.append(ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=call.id))
            msgs.extend(draw(st.permutations(results)))
        elif kind == "ghost":
            msgs.append(ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=f"ghost_{next(counter)}"))
        elif late:
            msgs.append(late.pop(draw(st.integers(0, len(late) - 1))))
    # Some held-back results come at the end (the host sent them after the user went on);
    # the rest never come.
    msgs.extend(late[: draw(st.integers(0, len(late)))])
    if end_with_tool_results:  # the host ran the tools and wants the model to go on
        calls = _tool_calls(draw, counter, 1, 3)
        msgs.append(ChatMessage(Role.ASSISTANT, draw(TEXTS), calls))
        answers = [ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=c.id) for c in calls]
        msgs.extend(draw(st.permutations(answers)))
    # Most messages get an id so a compression summary can name them.
    return [replace(m, id=f"m{i}") if draw(st.integers(0, 4)) else m for i, m in enumerate(msgs)]


@st.composite
def summaries(draw: st.DrawFn, history: list[ChatMessage]) -> CompressionSummary | None:
    ids = [m.id for m in history if m.id]
    if not ids or draw(st.integers(0, 2)):
        return None
    prefix = ids[: draw(st.integers(1, len(ids)))]
    return CompressionSummary(tuple(prefix), prefix[0], draw(NONBLANK))


@st.composite
def budgets(draw: st.DrawFn, req: BuildRequest) -> int:
    """Tiny (not even the required messages fit), near the cost of the history, or large."""
    tok = req.tokenizer
    survivors = repair_reference(req.history, req.compression_summary)[0]
    need = max(1, sum(message_tokens(m, tok) for m in required_messages(req, survivors)))
    rest = sum(message_tokens(m, tok) for m in req.history)
    if req.compression_summary is not None:
        rest += tok.count(req.compression_summary.summary) + 10
    kind = draw(st.sampled_from(["large", "near", "large", "near", "tiny"]))
    if kind == "tiny":
        return draw(st.integers(1, need))
    if kind == "near":
        return max(1, need + draw(st.sampled_from(range(0, rest + 5))))
    return need + rest + draw(st.integers(0, 5000))


# Provider formats first: they get the most checks.
FORMATS = st.sampled_from([OutputFormat.ANTHROPIC, OutputFormat.OPENAI, OutputFormat.NEUTRAL])


LAYERS = st.builds(
    PromptLayers,
    identity=NONBLANK,
    rules=TEXTS,
    skill=TEXTS,
    mode=TEXTS,
    memory=TEXTS,
    context=TEXTS,
)


@st.composite
def requests(draw: st.DrawFn) -> BuildRequest:
    # One request in five has a blank user message: a continuation after tool results.
    # Most of those histories end with answered calls; the rest must be refused.
    continuing = draw(st.integers(0, 4)) == 0
    history = draw(histories(end_with_tool_results=continuing and draw(st.integers(0, 4)) > 0))
    if not history:  # a blank user message needs a history (request validation)
        continuing = False
    use_layers = draw(st.integers(0, 3)) == 0
    req = BuildRequest(
        user_message=draw(BLANKS) if continuing else draw(NONBLANK),
        token_budget=1,
        tokenizer=TOKENIZERS[draw(st.sampled_from(sorted(TOKENIZERS)))],
        system_prompts=() if use_layers else tuple(draw(st.lists(TEXTS, max_size=3))),
        layers=draw(LAYERS) if use_layers else None,
        history=tuple(history),
        compression_summary=draw(summaries(history)),
        output_format=draw(FORMATS),
        overflow_policy=draw(st.sampled_from(list(OverflowPolicy))),
    )
    return replace(req, token_budget=draw(budgets(req)))
