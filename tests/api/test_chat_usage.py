"""Token usage through StreamChat: figures a provider does not report are counted by
contextd and marked estimated; the providers' prompt-cache counts are recorded per step,
turn and session."""

from __future__ import annotations

import pytest
from contextd.core.tokens import TokenizerRegistry
from contextd.v1 import chat_pb2 as cpb

from tests.support.chat_live import (
    Live,
    check_event_shape,
    completed,
    exported,
    new_user,
    request,
    run_turn,
)
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa

# Each OpenAI test runs against a server on SQLite and one on PostgreSQL (the Anthropic
# server is on SQLite only).
pytestmark = pytest.mark.both_backends

ANSWER = "Paris is the capital of France, and its largest city."


def local_count(text: str) -> int:
    """The turn's tokenizer's count (the server's default, cl100k_base)."""
    return TokenizerRegistry().get("cl100k_base").count(text)


def step_usages(events: list[cpb.StreamChatResponse]) -> list[cpb.TokenUsage]:
    return [e.usage.usage for e in events if e.WhichOneof("event") == "usage"]


async def test_a_server_without_usage_is_counted_locally(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(
        oa.text_reply(["Paris is the capital ", "of France, and its largest city."], usage=None),
        oa.text_reply(["Again."], usage=(90, 2), cached_tokens=0),
    )
    events = await run_turn(live, request(user, "What is the capital of France?"))
    done = completed(events)
    estimate = events[0].turn_started.prompt_tokens_estimate
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == ANSWER
    assert step_usages(events) == []  # the provider said nothing
    expected = cpb.TokenUsage(
        prompt_tokens=estimate,
        completion_tokens=local_count(ANSWER),
        prompt_tokens_estimate=estimate,
        estimated=True,
    )
    assert done.step_usage == done.turn_usage == done.session_usage == expected
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    tokens = {"prompt": estimate, "completion": local_count(ANSWER), "estimated": True}
    tokens["total"] = tokens["prompt"] + tokens["completion"]
    for e in log:
        if e["type"] in ("assistant", "final", "turn_end"):
            assert e["meta"]["tokens"] == tokens, e

    # A later turn the provider reports: its own usage is exact, the session's totals
    # still include the estimate.
    second = await run_turn(live, request(user, "Again?", sid))
    done = completed(second)
    assert (done.turn_usage.prompt_tokens, done.turn_usage.completion_tokens) == (90, 2)
    assert not done.turn_usage.estimated and not step_usages(second)[0].estimated
    assert done.session_usage.estimated
    assert done.session_usage.prompt_tokens == estimate + 90
    assert done.session_usage.completion_tokens == local_count(ANSWER) + 2
    assert "estimated" not in (await exported(live, user, sid))[-1]["meta"]["tokens"]


async def test_zero_usage_is_counted_locally(openai_live: Live) -> None:
    """Some local servers send a usage chunk of zeros."""
    live, fake = openai_live, openai_live.fake
    fake.script(
        oa.text_reply(["Paris is the capital of France, and its largest city."], usage=(0, 0))
    )
    events = await run_turn(live, request(new_user(), "What is the capital of France?"))
    done = completed(events)
    [reported] = step_usages(events)
    assert reported.estimated and reported.completion_tokens == local_count(ANSWER)
    assert reported.prompt_tokens == events[0].turn_started.prompt_tokens_estimate
    assert done.turn_usage == reported and done.session_usage.estimated


async def test_openai_cached_tokens_are_recorded(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(
        oa.text_reply(["Hello."], usage=(1200, 3), cached_tokens=1024),
        oa.text_reply(["Again."], usage=(1300, 2), cached_tokens=1152),
    )
    first = await run_turn(live, request(user, "Hi"))
    sid = first[0].turn_started.session_id
    second = await run_turn(live, request(user, "Hi again", sid))
    for events, cached in ((first, 1024), (second, 1152)):
        done = completed(events)
        [step] = step_usages(events)
        assert step.cache_read_tokens == cached and step.cache_write_tokens == 0
        assert not step.estimated
        assert done.step_usage == done.turn_usage == step
    total = completed(second).session_usage
    assert (total.prompt_tokens, total.cache_read_tokens) == (2500, 2176)
    assert not total.estimated
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    ends = [e["meta"]["tokens"] for e in log if e["type"] == "turn_end"]
    assert ends == [
        {"prompt": 1200, "completion": 3, "total": 1203, "cacheRead": 1024},
        {"prompt": 1300, "completion": 2, "total": 1302, "cacheRead": 1152},
    ]


async def test_anthropic_cache_reads_and_writes_are_recorded(anthropic_live: Live) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    user = new_user()
    fake.script(
        an.text_reply(["Hello."], input_tokens=20, output_tokens=3, cache_creation=1500),
        an.text_reply(["Again."], input_tokens=30, output_tokens=2, cache_read=1500),
    )
    first = await run_turn(live, request(user, "Hi"))
    sid = first[0].turn_started.session_id
    second = await run_turn(live, request(user, "Hi again", sid))
    one, two = completed(first), completed(second)
    # prompt_tokens counts every input token: Anthropic's input_tokens leaves the
    # cached ones out.
    assert (one.turn_usage.prompt_tokens, one.turn_usage.cache_write_tokens) == (1520, 1500)
    assert one.turn_usage.cache_read_tokens == 0 and not one.turn_usage.estimated
    assert (two.turn_usage.prompt_tokens, two.turn_usage.cache_read_tokens) == (1530, 1500)
    assert two.step_usage == step_usages(second)[0] == two.turn_usage
    total = two.session_usage
    assert (total.prompt_tokens, total.completion_tokens) == (3050, 5)
    assert (total.cache_read_tokens, total.cache_write_tokens) == (1500, 1500)
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    steps = [e["meta"]["tokens"] for e in log if e["type"] == "assistant"]
    assert steps == [
        {"prompt": 1520, "completion": 3, "total": 1523, "cacheWrite": 1500},
        {"prompt": 1530, "completion": 2, "total": 1532, "cacheRead": 1500},
    ]
