"""Inline turns store nothing: after inline turns on every HTTP front (Chat Completions,
the Responses API with ``store: false``, the Messages API) and an ephemeral StreamChat,
the database and the event logs are as they were, no memory was extracted although the
provider's model extracts memories after stored turns, and the turns are counted in the
metrics and the audit log all the same. A stateless tool loop still completes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import anthropic
import grpc
import openai
import pytest
from contextd.app.chat.request import MAX_ANSWER_NOTE
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc
from contextd.v1 import context_pb2 as pb

from tests.openai_http.conftest import MAX_MESSAGE, MODEL, Served
from tests.openai_http.test_python_sdk import WEATHER_TOOL
from tests.openai_http.test_stateless import LOOP
from tests.support.fake_openai_model import rule_model
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.grpc_web import web_address
from tests.support.metrics_scrape import scrape, value
from tests.support.model_server import model_server
from tests.support.sdk import free_port
from tests.support.stored_state import settled_state, stored_state


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Both model APIs on the rule model, which is also the model that extracts
    memories after a stored turn; metrics on."""
    with (
        rule_model() as model,
        model_server(
            tmp_path_factory.mktemp("ephemeral"),
            (
                *("--web-port", "0", "--openai-api", "--anthropic-api"),
                *("--provider", "openai", "--provider-base-url", model.url),
                *("--provider-model", MODEL, "--provider-timeout", "10"),
                *("--max-message-bytes", str(MAX_MESSAGE)),
                *("--metrics-port", str(free_port())),
            ),
            {"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        ) as proc,
    ):
        yield Served(proc, model)


def _openai(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0)


def _anthropic(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=f"http://{web_address(served.proc)}", api_key="unused", max_retries=0
    )


def _after_turn_texts(served: Served) -> list[str]:
    """The bodies (as text) of the model calls of contextd's work after a turn."""
    return [repr(body) for body in served.model.after_turn_requests()]


def _inline_turns(served: Served, user: str, marker: str) -> None:
    """An inline turn, streamed and not, on each front; each user message names
    ``marker``, so that work after a turn on it would show in the model's calls."""
    said = f"I live in {marker}."
    with _openai(served) as c:
        answer = c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": said}], user=user
        )
        assert answer.choices[0].message.content == f"fake answer to: {said}"
        assert answer.model_extra is not None
        extension = answer.model_extra["contextd"]
        assert extension["mode"] == "inline"
        assert extension["session_id"] == "" and extension["assistant_message_id"] == ""
        stream = c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": said}], user=user, stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == f"fake answer to: {said}"
        # The stateless tool loop: the host's call, then its result sent back.
        called = c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"weather in {marker}?"}],
            user=user,
            tools=[WEATHER_TOOL],
        )
        assert called.choices[0].finish_reason == "tool_calls"
        done = c.chat.completions.create(
            model=MODEL, messages=LOOP, user=user, tools=[WEATHER_TOOL]
        )
        assert done.choices[0].message.content == "the tool said: sunny"

        response = c.responses.create(model=MODEL, input=said, user=user, store=False)
        assert response.output_text == f"fake answer to: {said}"
        with c.responses.stream(model=MODEL, input=said, user=user, store=False) as events:
            streamed = events.get_final_response()
        assert streamed.output_text == f"fake answer to: {said}"
        for unstored in (response.id, streamed.id):
            with pytest.raises(openai.NotFoundError) as missing:
                c.responses.retrieve(unstored)
            assert missing.value.status_code == 404
            assert isinstance(missing.value.body, dict)
            assert missing.value.body["code"] == "not_found"
    with _anthropic(served) as a:
        message = a.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": said}],
            metadata={"user_id": user},
        )
        assert message.content[0].type == "text"
        assert message.content[0].text == f"fake answer to: {said}"
        with a.messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": said}],
            metadata={"user_id": user},
        ) as events:
            assert events.get_final_text() == f"fake answer to: {said}"


def _native_turn(served: Served, user: str, marker: str) -> list[cpb.StreamChatResponse]:
    with grpc.insecure_channel(served.proc.address) as channel:
        request = cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=user),
            messages=[pb.Message(role=pb.ROLE_SYSTEM, content="You are terse.")],
            user_message=f"I live in {marker}.",
            ephemeral=True,
        )
        return list(chat_pb2_grpc.ChatServiceStub(channel).StreamChat(request))


def test_inline_turns_store_nothing_and_extract_nothing(served: Served) -> None:
    user = f"eph-{uuid.uuid4().hex[:8]}"
    marker = f"Town{uuid.uuid4().hex[:8]}"
    data_dir = served.proc.data_dir
    before_state = settled_state(data_dir)
    before_metrics = scrape(served.proc)

    _inline_turns(served, user, marker)
    events = _native_turn(served, user, marker)
    started, done = events[0].turn_started, events[-1].turn_completed
    assert (started.session_id, started.turn_index, started.user_message_id) == ("", 1, "")
    assert done.status == cpb.TURN_STATUS_OK and done.assistant_message_id == ""
    assert done.final_text == f"fake answer to: I live in {marker}."
    # The session's usage is the turn's own: there is no session to add it to.
    assert done.turn_usage.prompt_tokens == 11 and done.session_usage == done.turn_usage

    assert settled_state(data_dir) == before_state, "an inline turn stored something"
    assert not (data_dir / "history").exists() or not any((data_dir / "history").iterdir())
    assert served.sessions(user) == []

    # A stored turn, by contrast, is worked on after it: once its memory extraction
    # reached the model, any of the inline turns' would have too.
    control = f"Stored{uuid.uuid4().hex[:8]}"
    with _openai(served) as c:
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"I live in {control}."}],
            user=user,
            extra_headers={"X-Contextd-Session": "new"},
        )
    deadline = time.monotonic() + 10
    while not any(control in t for t in _after_turn_texts(served)):
        assert time.monotonic() < deadline, "the stored turn's memory extraction never ran"
        time.sleep(0.05)
    assert not [t for t in _after_turn_texts(served) if marker in t]
    assert len(served.sessions(user)) == 1

    after_metrics = scrape(served.proc)

    def moved(name: str, **labels: str) -> float:
        return value(after_metrics, name, **labels) - value(before_metrics, name, **labels)

    # 9 inline turns (4 chat completions, 2 responses, 2 messages, 1 StreamChat) and the
    # stored one, each counted with its model call and tokens.
    assert moved("contextd_chat_turns_total", status="ok") == 9
    assert moved("contextd_chat_turns_total", status="requires_action") == 1
    model = {"gen_ai_system": "openai", "gen_ai_operation_name": "chat", "error_type": ""}
    assert moved("gen_ai_client_operation_duration_seconds_count", **model) >= 10
    tokens = moved(
        "gen_ai_client_token_usage_sum", gen_ai_system="openai", gen_ai_token_type="input"
    )
    assert tokens >= 9 * 11
    audited = [
        line
        for line in served.proc.logs("audit")
        if line.get("method") == "/contextd.v1.ChatService/StreamChat" and line.get("user") == user
    ]
    assert len(audited) >= 10


def test_an_ephemeral_turn_is_refused_with_what_needs_a_stored_one(served: Served) -> None:
    with grpc.insecure_channel(served.proc.address) as channel:
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        for field, request in (
            (
                "session.session_id",
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="eph", session_id="s-1"),
                    user_message="hi",
                    ephemeral=True,
                ),
            ),
            (
                "title",
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="eph"),
                    user_message="hi",
                    title="named",
                    ephemeral=True,
                ),
            ),
            (
                "tool_protocol",
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="eph"),
                    user_message="hi",
                    tool_protocol=cpb.TOOL_PROTOCOL_REACT,
                    ephemeral=True,
                ),
            ),
            (
                "answer_note",
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="eph"),
                    user_message="hi",
                    answer_note="kept?",
                    ephemeral=True,
                ),
            ),
            (
                "answer_note",
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="eph"),
                    user_message="hi",
                    answer_note="x" * (MAX_ANSWER_NOTE + 1),
                ),
            ),
        ):
            before = stored_state(served.proc.data_dir)
            with pytest.raises(grpc.RpcError) as refused:
                list(stub.StreamChat(request))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in (refused.value.details() or ""), refused.value.details()
            assert stored_state(served.proc.data_dir) == before
