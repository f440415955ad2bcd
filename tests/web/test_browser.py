"""An Office web add-in page, in headless Chromium, calls every contextd RPC over gRPC-Web.

The page (tests/browser/) uses @connectrpc/connect-web's gRPC-Web transport with code
generated from protos/, is served over HTTPS from its own origin, and calls the web port
of a live server, so every call passes a real CORS preflight. It records what each call
returned; these tests judge that record, what the browser's network layer saw, and what
the server stored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc.aio
import pytest
from contextd.v1 import (
    chat_pb2,
    context_pb2,
    memory_pb2,
    memory_pb2_grpc,
    prompts_pb2,
    sessions_pb2,
    sessions_pb2_grpc,
    users_pb2,
)

from tests.support.browser_harness import (
    PageResult,
    PageVisit,
    localhost_tls,
    page_server,
    require_browser,
    run_pages,
)
from tests.support.chat_live import ChatFake, eventually, openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply
from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server

TOURIST, STOPPER, STRANGER = "addin-tourist", "addin-stopper", "addin-stranger"
SCENARIO, SKILL = f"trip-planner-{TOURIST}", f"cite-pages-{TOURIST}"
PARTIAL_ANSWER = "Once upon a time,"


@dataclass
class Browsed:
    """The three pages' results and the servers they talked to."""

    tour: PageResult
    aborted: PageResult
    refused: PageResult
    allowed_origin: str
    stranger_origin: str
    echo: ServerProcess
    slow: ServerProcess
    fake: ChatFake


@pytest.fixture(scope="module")
async def browsed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browsed]:
    require_browser()
    tls = localhost_tls(tmp_path_factory.mktemp("tls"))
    fake = openai_fake()
    async with page_server(tls) as allowed, page_server(tls) as stranger, fake:
        echo = start_server(
            tmp_path_factory.mktemp("browser-echo"),
            *("--web-port", "0", "--cors-origins", allowed),
        )
        # A model that sends one piece of its answer, then waits until it is hung up on.
        slow = start_server(
            tmp_path_factory.mktemp("browser-slow"),
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--web-port", "0", "--cors-origins", allowed),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        fake.script(StreamReply(oa.text_frames([PARTIAL_ANSWER])[:2], ending="hang"))
        try:
            pages = await run_pages(
                {
                    "tour": PageVisit("tour", allowed, web_address(echo), TOURIST),
                    "aborted": PageVisit("aborted-turn", allowed, web_address(slow), STOPPER),
                    "refused": PageVisit("refused-origin", stranger, web_address(echo), STRANGER),
                }
            )
            yield Browsed(
                pages["tour"],
                pages["aborted"],
                pages["refused"],
                allowed,
                stranger,
                echo,
                slow,
                fake,
            )
        finally:
            for proc in (echo, slow):
                assert proc.stop() == 0
                assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


def response(page: PageResult, method: str, index: int = 0) -> dict[str, Any]:
    """The JSON answer of the ``index``-th call of ``method``, which must have succeeded."""
    call = page.calls(method)[index]
    assert "error" not in call, call
    return dict(call["response"])


def events(page: PageResult, method: str) -> list[tuple[str, dict[str, Any]]]:
    """A streaming call's events as (kind, value), e.g. ("textDelta", {"text": ...})."""
    return [next(iter(event.items())) for event in page.call(method)["events"]]


def all_rpcs() -> set[str]:
    files = (context_pb2, chat_pb2, sessions_pb2, memory_pb2, prompts_pb2, users_pb2)
    return {
        f"/{service.full_name}/{method.name}"
        for module in files
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


# -- the tour: every RPC, from an allowed origin -----------------------------------------


def test_the_page_calls_every_rpc_of_every_service(browsed: Browsed) -> None:
    report = browsed.tour.report
    assert report["failure"] is None, report["failure"]
    assert report["origin"] == browsed.allowed_origin
    assert {call["method"] for call in report["calls"]} == all_rpcs()
    failed = [
        (c["method"].rsplit("/", 1)[1], c["error"]["code"]) for c in report["calls"] if "error" in c
    ]
    assert failed == [("BuildMessages", "INVALID_ARGUMENT"), ("GetSession", "NOT_FOUND")]
    errors = [line for line in browsed.tour.console if line.startswith(("error", "pageerror"))]
    assert errors == []  # no script error, no failed resource


def test_context_service_without_a_session(browsed: Browsed) -> None:
    page = browsed.tour
    tokenizers = response(page, "ContextService/ListTokenizers")
    assert tokenizers["defaultTokenizer"] == "cl100k_base"
    available = {t["name"] for t in tokenizers["tokenizers"] if t.get("available")}
    assert {"estimate", "cl100k_base"} <= available

    assert response(page, "ContextService/CountTokens") == {
        "tokenizer": "cl100k_base",
        "textTokens": [4, 6],
        "messageTokens": [7],
        "totalTokens": 17,
    }

    prompt = response(page, "ContextService/AssemblePrompt")
    assert prompt["systemPrompt"] == (
        "You are Ada, a travel assistant.\n\nAnswer in English.\n\nToday is May 1."
    )
    assert [(layer["name"], layer.get("included", False)) for layer in prompt["layers"]] == [
        ("identity", True),
        ("rules", True),
        ("skill", False),
        ("mode", False),
        ("memory", False),
        ("context", True),
    ]

    built = response(page, "ContextService/BuildMessages", 0)
    assert [(m["role"], m["content"]) for m in built["messages"]] == [
        ("ROLE_SYSTEM", "You are a travel assistant."),
        ("ROLE_USER", "Which one has the best food?"),
        ("ROLE_ASSISTANT", "Both. Porto for francesinha."),
        ("ROLE_USER", "Book me a table."),
    ]
    assert built["report"]["dropped"] == [{"count": 2, "reason": "DROP_REASON_BUDGET"}]
    assert built["report"]["totalTokens"] <= built["report"]["tokenBudget"] == 30
    openai_messages = json.loads(built["payloadJson"])["messages"]
    assert [m["role"] for m in openai_messages] == ["system", "user", "assistant", "user"]


def test_prompt_service(browsed: Browsed) -> None:
    page = browsed.tour
    template = response(page, "PromptService/UpsertTemplate")["template"]
    assert (template["scenario"], template["version"], template["enabled"]) == (SCENARIO, 1, True)
    listed = response(page, "PromptService/ListTemplates", 0)["templates"]
    assert [t["systemPrompt"] for t in listed if t["scenario"] == SCENARIO] == [
        "You help plan trips to {{city}}."
    ]
    skill = response(page, "PromptService/UpsertSkill")["skill"]
    assert (skill["name"], skill["apps"], skill["enabled"]) == (SKILL, ["word"], True)
    assert [s["name"] for s in response(page, "PromptService/ListSkills")["skills"]] == [SKILL]

    assert response(page, "PromptService/DeleteTemplate") == {}
    assert response(page, "PromptService/DeleteSkill") == {}
    after = response(page, "PromptService/ListTemplates", 1).get("templates", [])
    assert SCENARIO not in [t["scenario"] for t in after]


def test_session_service(browsed: Browsed) -> None:
    page = browsed.tour
    session = response(page, "SessionService/CreateSession")["session"]
    assert session["userId"] == TOURIST
    assert (session["scenario"], session["host"], session["title"]) == (
        SCENARIO,
        "word",
        "Trip to Lisbon",
    )
    assert session["metadata"] == {"document": "itinerary.docx"}
    assert response(page, "SessionService/GetSession")["session"] == session

    appended = response(page, "SessionService/AppendMessages")["messages"]
    assert [(m["message"]["role"], m.get("seq", 0)) for m in appended] == [
        ("ROLE_USER", 0),
        ("ROLE_ASSISTANT", 1),
    ]
    assert all(m["sessionId"] == session["id"] and m["message"]["tokens"] > 0 for m in appended)
    assert response(page, "SessionService/AddCompressionSummary")["summaryId"]
    assert response(page, "SessionService/SetSessionSummary") == {}

    [listed] = response(page, "SessionService/ListSessions")["sessions"]
    assert (listed["id"], listed["messageCount"]) == (session["id"], 4)  # 2 appended, 1 turn

    assert response(page, "SessionService/DeleteSession") == {}
    gone = page.calls("SessionService/GetSession")[1]["error"]
    assert gone["code"] == "NOT_FOUND"
    assert session["id"] in gone["message"]


def test_memory_service(browsed: Browsed) -> None:
    page = browsed.tour
    first, again, other = (response(page, "MemoryService/AddMemory", i) for i in range(3))
    assert first["created"] is True
    assert first["memory"]["content"] == "I live in Lisbon."
    assert not again.get("created")  # the same text is stored once
    assert again["memory"]["id"] == first["memory"]["id"]
    assert other["created"] is True
    assert (
        page.calls("MemoryService/DeleteMemory")[0]["request"]["memoryId"]
        == (other["memory"]["id"])
    )
    assert response(page, "MemoryService/DeleteMemory") == {}

    [found] = response(page, "MemoryService/SearchMemories")["results"]
    assert found["memory"]["content"] == "I live in Lisbon."
    assert found["relevance"] > 0
    assert found["score"] > 0
    listed = response(page, "MemoryService/ListMemories")["memories"]
    assert [m["content"] for m in listed] == ["I live in Lisbon."]


def test_build_messages_in_session_mode(browsed: Browsed) -> None:
    page = browsed.tour
    built = response(page, "ContextService/BuildMessages", 1)
    assert page.calls("ContextService/BuildMessages")[1]["request"]["session"]["userId"] == TOURIST
    system, summary, user = built["messages"]
    assert system["role"] == "ROLE_SYSTEM"
    for part in (
        "You help plan trips to Lisbon.",  # the scenario's template, {{city}} filled
        "Cite the page of itinerary.docx you rely on.",  # the skill for host "word"
        "Title: Trip to Lisbon",  # the session layer
        "- I live in Lisbon.",  # the memory layer
    ):
        assert part in system["content"]
    assert summary["content"] == (
        "[Previous conversation summary]\n\nThe user plans a trip to Portugal."
    )
    assert (user["role"], user["content"]) == ("ROLE_USER", "Where do I start in Lisbon?")
    report = built["report"]
    assert report["dropped"] == [{"count": 2, "reason": "DROP_REASON_COMPRESSED"}]
    layers = {layer["name"]: layer for layer in report["contextLayers"]}
    assert layers["memory"]["itemsKept"] == 1
    anthropic = json.loads(built["payloadJson"])
    assert anthropic["system"].startswith("You are a helpful assistant.")
    assert [m["role"] for m in anthropic["messages"]] == ["user"]


def test_stream_chat_streams_the_echo_answer_in_order(browsed: Browsed) -> None:
    page = browsed.tour
    session_id = response(page, "SessionService/CreateSession")["session"]["id"]
    stream = events(page, "ChatService/StreamChat")
    kinds = [kind for kind, _ in stream]
    deltas = kinds.count("textDelta")
    assert deltas > 1
    assert kinds == ["turnStarted", *["textDelta"] * deltas, "usage", "turnCompleted"]

    started, completed = stream[0][1], stream[-1][1]
    assert (started["sessionId"], started["provider"]) == (session_id, "echo")
    assert started["context"]["totalTokens"] == started["promptTokensEstimate"] > 0
    assert completed["status"] == "TURN_STATUS_OK"
    assert (
        "".join(value["text"] for kind, value in stream if kind == "textDelta")
        == (completed["finalText"])
    )
    assert "What should I see first in Lisbon?" in completed["finalText"]
    assert stream[-2][1]["usage"]["completionTokens"] > 0

    stored = response(page, "SessionService/ListMessages")["messages"]
    assert [m["message"]["content"] for m in stored[-2:]] == [
        "What should I see first in Lisbon?",
        completed["finalText"],
    ]
    assert stored[-1]["message"]["id"] == completed["assistantMessageId"]


def test_collect_and_export_events_after_the_turn(browsed: Browsed) -> None:
    page = browsed.tour
    answer_id = events(page, "ChatService/StreamChat")[-1][1]["assistantMessageId"]
    collected = response(page, "ContextService/Collect")
    assert collected["messageId"] == answer_id
    assert collected["isCollected"] is True
    assert collected["memoryId"]  # remember: the answer became a memory

    session_id = response(page, "SessionService/CreateSession")["session"]["id"]
    exported = page.call("SessionService/ExportEvents")["events"]
    lines = [json.loads(event["json"]) for event in exported]
    assert [event["type"] for event in exported] == [line["type"] for line in lines]
    # The session's messages were appended before its first turn, which starts its log.
    assert [line["type"] for line in lines] == [
        "session_start",
        *("turn_start", "assistant", "final", "turn_end"),
    ]
    assert {line["session_id"] for line in lines} == {session_id}
    assert lines[1]["content"] == "What should I see first in Lisbon?"
    assert lines[3]["content"] == events(page, "ChatService/StreamChat")[-1][1]["finalText"]
    assert lines[4]["meta"]["status"] == "ok"


def test_invalid_argument_names_each_field_decoded_in_the_browser(browsed: Browsed) -> None:
    call = browsed.tour.calls("ContextService/BuildMessages")[2]
    assert call["request"]["tokenBudget"] == -5
    error = call["error"]
    assert error["code"] == "INVALID_ARGUMENT"
    fields = [violation["field"] for violation in error["violations"]]
    assert fields == ["token_budget", "history[0].tool_calls[0].name"]
    assert all(violation["description"] for violation in error["violations"])


async def test_the_session_the_page_deleted_is_gone(browsed: Browsed) -> None:
    async with grpc.aio.insecure_channel(browsed.echo.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        listed = await sessions.ListSessions(sessions_pb2.ListSessionsRequest(user_id=TOURIST))
    assert list(listed.sessions) == []


def test_every_call_passed_a_cors_preflight(browsed: Browsed) -> None:
    page, origin = browsed.tour, browsed.allowed_origin
    preflights, fetches = page.requests("Preflight"), page.requests("Fetch")
    assert len(fetches) == len(page.report["calls"])
    assert all(
        (f["method"], f["status"], f["allowOrigin"]) == ("POST", 200, origin) for f in fetches
    )
    assert all("failure" not in f for f in fetches)
    # One preflight per method URL: the browser caches the answer (Access-Control-Max-Age).
    urls = [p["url"] for p in preflights]
    assert sorted(urls) == sorted({f["url"] for f in fetches})
    assert all(
        (p["method"], p["status"], p["allowOrigin"]) == ("OPTIONS", 204, origin) for p in preflights
    )


# -- a turn the page stops with AbortController --------------------------------------------


async def test_aborting_stream_chat_stores_the_partial_answer_as_cancelled(
    browsed: Browsed,
) -> None:
    page = browsed.aborted
    assert page.report["failure"] is None, page.report["failure"]
    call = page.call("ChatService/StreamChat")
    assert [next(iter(event)) for event in call["events"]] == ["turnStarted", "textDelta"]
    assert call["events"][1]["textDelta"]["text"] == PARTIAL_ANSWER
    assert call["error"]["code"] == "CANCELLED"
    [chat_request] = [f for f in page.requests("Fetch") if f["url"].endswith("/StreamChat")]
    assert chat_request["failure"] == "net::ERR_ABORTED"

    # The page saw the stored answer through a later RPC ...
    stored = response(page, "SessionService/ListMessages", -1)["messages"]
    assert [(m["message"]["role"], m["message"]["content"], m.get("status")) for m in stored] == [
        ("ROLE_USER", "Tell me a long story.", None),
        ("ROLE_ASSISTANT", PARTIAL_ANSWER, "cancelled"),
    ]
    # ... and the server says the same natively, and closed the model's stream.
    session_id = call["events"][0]["turnStarted"]["sessionId"]
    async with grpc.aio.insecure_channel(browsed.slow.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        native = await sessions.ListMessages(
            sessions_pb2.ListMessagesRequest(user_id=STOPPER, session_id=session_id)
        )
    assert [(m.message.content, m.status) for m in native.messages] == [
        ("Tell me a long story.", ""),
        (PARTIAL_ANSWER, "cancelled"),
    ]
    assert len(browsed.fake.disconnects) == 1

    async def chat_logged() -> list[dict[str, object]]:
        return [e for e in browsed.slow.logs("rpc") if str(e["method"]).endswith("/StreamChat")]

    assert [e["code"] for e in await eventually(chat_logged)] == ["CANCELLED"]


# -- a page from an origin the server does not allow ---------------------------------------


async def test_a_page_from_another_origin_is_refused_and_stores_nothing(
    browsed: Browsed,
) -> None:
    page = browsed.refused
    assert page.report["failure"] is None, page.report["failure"]
    assert page.report["origin"] == browsed.stranger_origin != browsed.allowed_origin
    calls = page.report["calls"]
    assert [c["method"].rsplit("/", 1)[1] for c in calls] == ["CreateSession", "AddMemory"]
    # fetch() rejects without telling the page why; connect-web reports that as UNKNOWN.
    assert all(c["error"]["code"] == "UNKNOWN" and "response" not in c for c in calls)

    preflights, fetches = page.requests("Preflight"), page.requests("Fetch")
    assert [(p["status"], p.get("allowOrigin")) for p in preflights] == [(403, None)] * 2
    assert [f.get("corsError") for f in fetches] == ["PreflightMissingAllowOriginHeader"] * 2
    assert all("status" not in f for f in fetches)  # the POST itself was never sent
    refused = browsed.echo.logs("cors preflight refused")
    assert [entry["origin"] for entry in refused] == [browsed.stranger_origin] * 2
    assert not browsed.echo.logs("cross-origin call refused")

    async with grpc.aio.insecure_channel(browsed.echo.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        memories = memory_pb2_grpc.MemoryServiceStub(channel)
        listed = await sessions.ListSessions(sessions_pb2.ListSessionsRequest(user_id=STRANGER))
        remembered = await memories.ListMemories(memory_pb2.ListMemoriesRequest(user_id=STRANGER))
    assert list(listed.sessions) == []
    assert list(remembered.memories) == []
