"""The context inspector (/inspect on the web port) in headless Chromium, against a live
server with ``--auth api-key`` and real data: chat turns through a fake model (a host
tool call, a budget that drops most of a 1,000-message session, a capped tool result, a
memory put in the context), memories with a changed text, and another tenant's session.

Every page is opened as a person would: sign in with a key, then follow a link or a
shared URL. The page reaches the data only through the Connect API with that key, so
these tests also check that what the server refuses is refused on the page.

The 1,000-message session's first meaningful paint is printed, not asserted on.
Set CONTEXTD_INSPECT_SCREENSHOTS to a folder to keep the pages' screenshots
(docs/images/ holds the manual's).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb
from google.protobuf.field_mask_pb2 import FieldMask

from tests.support.auth import bearer, create_key
from tests.support.browser_harness import CHROMIUM, HARNESS, PAGE_TIMEOUT_S, require_browser
from tests.support.chat_live import ChatFake, eventually, openai_fake
from tests.support.fake_embeddings import fake_embeddings
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply
from tests.support.grpc_web import web_address
from tests.support.keyed_server import UNKNOWN_KEY
from tests.support.server import ServerProcess, start_server

DRIVER = HARNESS / "dist" / "inspect.mjs"
BIG_SESSION_MESSAGES = 1000
SHEET = cpb.ToolDefinition(
    name="read_sheet",
    description="Reads a worksheet",
    parameters_json=json.dumps({"type": "object", "properties": {"sheet": {"type": "string"}}}),
)
TRIP = "Trip to Lisbon 里斯本之行"
BIG = "A long analysis 长对话"
SISTER = "用户的妹妹住在里斯本 (the user's sister lives in Lisbon)"
COMPRESSED = "They compared the regions week by week; 逐周比较了各区域。"
OLD_DIET, NEW_DIET = "The user is vegetarian", "The user is vegan since May"


@dataclass
class Data:
    proc: ServerProcess
    web: str
    alice: str
    service: str
    mallory: str
    trip: str
    big: str
    big_turn: int
    foreign: str
    changed_memory: str


async def _turn(chat: Any, key: str, req: cpb.StreamChatRequest) -> cpb.TurnCompleted:
    events = [e async for e in chat.StreamChat(req, metadata=bearer(key))]
    assert events[-1].WhichOneof("event") == "turn_completed", events[-1]
    return events[-1].turn_completed


def _text(answer: str) -> StreamReply:
    return StreamReply(oa.text_frames([answer]))


async def _seed(proc: ServerProcess, fake: ChatFake, alice: str, mallory: str) -> Data:
    async with grpc.aio.insecure_channel(proc.address) as channel:
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        memory = memory_pb2_grpc.MemoryServiceStub(channel)
        auth = bearer(alice)

        await memory.AddMemory(mpb.AddMemoryRequest(content=SISTER), metadata=auth)

        async def embedded() -> bool:
            query = mpb.SearchMemoriesRequest(query="sister Lisbon", explain=True)
            found = await memory.SearchMemories(query, metadata=auth)
            return any(r.explain.HasField("cosine") for r in found.results)

        # Memories are embedded in the background: searched by meaning once they are.
        assert await eventually(embedded, within=10.0)
        diet = await memory.AddMemory(
            mpb.AddMemoryRequest(content=OLD_DIET, metadata={"topic": "food"}), metadata=auth
        )
        await memory.UpdateMemory(
            mpb.UpdateMemoryRequest(
                memory_id=diet.memory.id,
                memory=mpb.Memory(content=NEW_DIET),
                update_mask=FieldMask(paths=["content"]),
            ),
            metadata=auth,
        )

        # A turn that calls a host tool, continued with its result, then one more.
        trip = await sessions.CreateSession(spb.CreateSessionRequest(title=TRIP), metadata=auth)
        trip_id = trip.session.id
        fake.script(
            StreamReply(oa.tool_call_frames([("call_1", "read_sheet", '{"sheet":"plan"}')])),
            _text("You land on Friday; 周五到达。"),
            _text("Take the 28 tram."),
        )
        session = pb.SessionContext(session_id=trip_id)
        first = await _turn(
            chat,
            alice,
            cpb.StreamChatRequest(session=session, user_message="When do I land?", tools=[SHEET]),
        )
        assert first.status == cpb.TURN_STATUS_REQUIRES_ACTION
        await _turn(
            chat,
            alice,
            cpb.StreamChatRequest(
                session=session,
                tools=[SHEET],
                tool_results=[cpb.ToolResult(tool_call_id="call_1", content="Friday 09:40 LIS")],
            ),
        )
        await _turn(
            chat, alice, cpb.StreamChatRequest(session=session, user_message="最好的交通方式？")
        )

        # 1,000 stored messages, the last a long tool result, then a turn over a small
        # budget: most of the history is dropped, the result capped, a memory put in.
        big = await sessions.CreateSession(spb.CreateSessionRequest(title=BIG), metadata=auth)
        big_id = big.session.id
        batch: list[pb.Message] = []
        for i in range(BIG_SESSION_MESSAGES - 2):
            role = pb.ROLE_USER if i % 2 == 0 else pb.ROLE_ASSISTANT
            batch.append(
                pb.Message(role=role, content=f"message {i}: 第{i}条消息, a few words more")
            )
        batch += [
            pb.Message(
                role=pb.ROLE_ASSISTANT,
                tool_calls=[pb.ToolCall(id="call_s", name="read_sheet", arguments="{}")],
            ),
            pb.Message(role=pb.ROLE_TOOL, tool_call_id="call_s", content="north,1200\n" * 400),
        ]
        stored: list[str] = []
        for start in range(0, len(batch), 200):
            appended = await sessions.AppendMessages(
                spb.AppendMessagesRequest(session_id=big_id, messages=batch[start : start + 200]),
                metadata=auth,
            )
            stored += [m.message.id for m in appended.messages]
        # Ten messages near the end stand in a compression summary's place.
        compressed = stored[960:970]
        await sessions.AddCompressionSummary(
            spb.AddCompressionSummaryRequest(
                session_id=big_id,
                message_ids=compressed,
                start_message_id=compressed[0],
                summary=COMPRESSED,
            ),
            metadata=auth,
        )
        fake.script(_text("North leads; 北区领先。"))
        done = await _turn(
            chat,
            alice,
            cpb.StreamChatRequest(
                session=pb.SessionContext(session_id=big_id),
                user_message="Where does my sister live, and which region leads?",
                token_budget=1500,
                editing=pb.ContextEditing(tool_result_cap_tokens=200),
            ),
        )
        assert done.status == cpb.TURN_STATUS_OK
        events = [
            json.loads(e.json)
            async for e in sessions.ExportEvents(
                spb.ExportEventsRequest(session_id=big_id), metadata=auth
            )
        ]
        [big_turn] = [e["turn"] for e in events if e["type"] == "turn_start"]

        foreign = await sessions.CreateSession(
            spb.CreateSessionRequest(title="mallory's own"), metadata=bearer(mallory)
        )
    return Data(
        proc,
        web_address(proc),
        alice,
        "",
        mallory,
        trip_id,
        big_id,
        big_turn,
        foreign.session.id,
        diet.memory.id,
    )


@pytest.fixture(scope="module")
async def data(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Data]:
    require_browser()
    if not DRIVER.exists():
        pytest.fail(f"{DRIVER} is missing: `make test` builds tests/browser")
    directory = tmp_path_factory.mktemp("inspect")
    alice = create_key(directory, "alice")
    service = create_key(directory, "inspector", "--service")
    mallory = create_key(directory, "mallory", "--tenant", "other")
    fake = openai_fake()
    with fake_embeddings(key=FAKE_KEY) as embeddings:
        async with fake:
            proc = start_server(
                directory,
                *("--auth", "api-key", "--web-port", "0"),
                *("--provider", "openai", "--provider-base-url", fake.url),
                *("--provider-model", "gpt-test", "--embedding-provider", "openai"),
                *("--embedding-base-url", embeddings.url, "--embedding-model", embeddings.model),
                env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY, "OPENAI_API_KEY": FAKE_KEY},
            )
            try:
                seeded = await _seed(proc, fake, alice, mallory)
                seeded.service = service
                yield seeded
            finally:
                assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


def _shot(name: str, full_page: bool = False) -> list[dict[str, Any]]:
    folder = os.environ.get("CONTEXTD_INSPECT_SCREENSHOTS")
    if not folder:
        return []
    path = str(Path(folder).resolve() / f"inspect-{name}.png")
    return [{"screenshot": path, "fullPage": full_page}]


def _sign_in(key: str, user: str = "") -> list[dict[str, Any]]:
    return [
        {"wait": "#sign-in"},
        {"fill": "#key", "value": key},
        {"fill": "#user", "value": user},
        {"press": "Enter"},
    ]


async def _browse(
    data: Data, visits: dict[str, tuple[str, list[dict[str, Any]]]]
) -> dict[str, Any]:
    """Opens each visit (a hash route and its steps) in a fresh tab of one Chromium."""
    config = {
        "chromium": str(CHROMIUM),
        "timeoutMs": PAGE_TIMEOUT_S * 1000,
        "visits": [
            {
                "name": name,
                "url": f"http://{data.web}/inspect/{route}",
                "steps": steps,
                "viewport": {"width": 1280, "height": 900},
            }
            for name, (route, steps) in visits.items()
        ],
    }
    driver = await asyncio.create_subprocess_exec(
        "node",
        str(DRIVER),
        json.dumps(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(driver.communicate(), PAGE_TIMEOUT_S * len(visits) + 30)
    assert driver.returncode == 0, f"the inspector's driver failed:\n{err.decode()}"
    return {result["name"]: result for result in json.loads(out)}


@pytest.fixture(scope="module")
async def pages(data: Data) -> dict[str, Any]:
    ready = 'main[data-ready="{}"]'
    return await _browse(
        data,
        {
            "sessions": (
                "",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("sessions")},
                    {"read": ".sessions tbody tr td:first-child", "as": "titles"},
                    {"read": 'nav a[aria-current="page"]', "as": "current"},
                    {"fill": "#session-search", "value": "里斯本"},
                    {"read": ".sessions tbody tr td:first-child", "as": "found"},
                    *_shot("sessions"),
                    # From the search box, the keyboard alone opens the session found.
                    {"press": "Tab"},
                    {"press": "Enter"},
                    {"wait": ready.format("session")},
                    {"read": "main h1", "as": "opened"},
                ],
            ),
            "session": (
                f"#/session/{data.trip}",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("session")},
                    {"read": ".timeline li", "as": "turns"},
                    {"read": ".events .etype", "as": "events"},
                    {"attribute": ".timeline a", "name": "href", "as": "links"},
                    *_shot("session"),
                ],
            ),
            "turn": (
                f"#/session/{data.big}/turn/{data.big_turn}",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("turn")},
                    {"read": ".dropped", "as": "dropped"},
                    {"read": ".badge", "as": "badges"},
                    {"read": ".memories li", "as": "memories"},
                    {"read": ".prefix-end", "as": "prefix"},
                    {"read": "table.layers tbody th", "as": "layers"},
                    {"read": ".budget p", "as": "budget"},
                    {"read": ".history .msg", "as": "messages"},
                    *_shot("turn"),
                ],
            ),
            "memory": (
                "#/memory",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("memory")},
                    {"read": "#memory-list tbody tr", "as": "memories"},
                    {"click": f'tr[data-memory="{data.changed_memory}"] button'},
                    {"wait": f'tr[data-memory="{data.changed_memory}"] .history-of li'},
                    {
                        "read": f'tr[data-memory="{data.changed_memory}"] .history-of li',
                        "as": "history",
                    },
                    {"fill": "#search", "value": "sister Lisbon"},
                    {"press": "Enter"},
                    {"wait": ready.format("searched")},
                    {"read": "#search-results tbody tr", "as": "search"},
                    *_shot("memory"),
                    {"fill": "#search", "value": ""},
                    {"fill": "#metadata", "value": "topic=food"},
                    {"press": "Enter"},
                    {"wait": ready.format("memory")},
                    {"read": "#memory-list tbody tr", "as": "filtered"},
                ],
            ),
            "playground": (
                "#/playground",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("playground")},
                    {"fill": "#budget", "value": "250"},
                    {"fill": "#cap", "value": "64"},
                    {"click": "#build"},
                    {"wait": ready.format("built")},
                    {"read": ".playground-result .dropped", "as": "dropped"},
                    {"read": ".playground-result .badge", "as": "badges"},
                    {"read": ".history.built .msg header", "as": "built"},
                    *_shot("playground", full_page=True),
                    # A history loaded from a session the key may read.
                    {"fill": "#load-session", "value": data.trip},
                    {"click": "#load"},
                    {"wait": ready.format("loaded")},
                    {"value": "#history", "as": "loaded"},
                ],
            ),
            "big": (
                f"#/session/{data.big}",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("session")},
                    # A fresh load with the credential kept: what a shared link costs.
                    {"reload": True},
                    {"wait": ready.format("session")},
                    {"mark": "inspect:session", "as": "session"},
                    {"read": ".events li", "as": "events"},
                    # The same for its turn: 76 messages kept, 924 dropped.
                    {"hash": f"#/session/{data.big}/turn/{data.big_turn}"},
                    {"wait": ready.format("turn")},
                    {"reload": True},
                    {"wait": ready.format("turn")},
                    {"mark": "inspect:turn", "as": "turn"},
                    {"read": ".history .msg", "as": "turn_messages"},
                ],
            ),
            "refused": (
                "",
                [
                    *_sign_in(UNKNOWN_KEY),
                    {"wait": "#status .error"},
                    {"read": "#status", "as": "error"},
                    {"wait": "#sign-in"},
                ],
            ),
            "foreign": (
                f"#/session/{data.foreign}",
                [
                    *_sign_in(data.alice),
                    {"wait": ready.format("error")},
                    {"read": "#status", "as": "error"},
                    {"read": "main", "as": "main"},
                ],
            ),
            "foreign_turn": (
                f"#/session/{data.trip}/turn/1",
                [
                    *_sign_in(data.mallory),
                    {"wait": ready.format("error")},
                    {"read": "#status", "as": "error"},
                    {"read": "main", "as": "main"},
                ],
            ),
            "service": (
                "",
                [
                    *_sign_in(data.service, "alice"),
                    {"wait": ready.format("sessions")},
                    {"read": ".sessions tbody tr td:first-child", "as": "titles"},
                ],
            ),
        },
    )


def _clean(page: dict[str, Any]) -> None:
    assert page["console"] == [], page["console"]


def test_the_page_is_served_with_its_security_headers(pages: dict[str, Any]) -> None:
    headers = pages["sessions"]["headers"]
    assert headers["content-type"] == "text/html; charset=utf-8"
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"


def test_sessions_newest_first_and_searchable(pages: dict[str, Any]) -> None:
    page = pages["sessions"]
    _clean(page)
    assert page["read"]["titles"] == [BIG, TRIP]
    assert page["read"]["found"] == [TRIP]
    assert page["read"]["current"] == ["Sessions"]
    assert page["read"]["opened"] == [TRIP]


def test_a_session_shows_its_turns_beside_the_event_log(pages: dict[str, Any], data: Data) -> None:
    page = pages["session"]
    _clean(page)
    turns = page["read"]["turns"]
    assert len(turns) == 2
    assert "requires_action" not in turns[0] and "ok" in turns[0]
    assert "tools: read_sheet" in turns[0] and "gpt-test" in turns[0]
    assert "最好的交通方式？" in turns[1]
    assert page["read"]["links"] == [f"#/session/{data.trip}/turn/{n}" for n in (1, 2)]
    events = page["read"]["events"]
    assert events[0] == "session_start" and events.count("turn_end") == 3
    assert "action" in events and "observation" in events


def test_a_turn_as_the_model_saw_it(pages: dict[str, Any]) -> None:
    page = pages["turn"]
    _clean(page)
    read = page["read"]
    budget, compressed = read["dropped"]
    assert "over the token budget" in budget
    assert compressed.startswith("10 messages dropped (#960–#969): replaced by the compression")
    assert any(b.startswith("capped read_sheet") for b in read["badges"]), read["badges"]
    assert len(read["memories"]) == 1 and "里斯本" in read["memories"][0]
    assert "layer: memory" in read["layers"] and "layer: window" in read["layers"]
    assert "of 1,500 tok" in read["budget"][0]
    # The system message, the summary, the kept history and the user message, in order.
    assert read["messages"][0].startswith("system")
    assert (
        read["messages"][1].startswith("compression summary") and COMPRESSED in read["messages"][1]
    )
    assert "Where does my sister live" in read["messages"][-1]


def test_memories_with_history_filters_and_scores(pages: dict[str, Any]) -> None:
    page = pages["memory"]
    _clean(page)
    read = page["read"]
    assert len(read["memories"]) == 2
    assert any(NEW_DIET in row and "topic=food" in row for row in read["memories"])
    [change] = read["history"]
    assert OLD_DIET in change and NEW_DIET in change and "update" in change
    # Each candidate with its rank, score, relevance and recency, then the text.
    [found] = read["search"]
    rank, score, term_score, cosine, relevance, recency, text = found.split("\t")
    assert rank == "1" and text == SISTER
    assert float(score) > 0 and float(term_score) > 0 and float(relevance) > 0
    assert 0 < float(recency) <= 1
    # This server searches by meaning too.
    assert 0 < float(cosine) <= 1
    assert len(read["filtered"]) == 1 and NEW_DIET in read["filtered"][0]


def test_the_playground_builds_beside_its_input(pages: dict[str, Any]) -> None:
    page = pages["playground"]
    _clean(page)
    read = page["read"]
    # Capped to 64 tokens, the example's long tool result fits a 250-token budget.
    assert read["dropped"] == []
    assert any(b.startswith("capped read_sheet") for b in read["badges"]), read["badges"]
    assert read["built"][0].startswith("system") and read["built"][-1].startswith("user")
    loaded = json.loads(read["loaded"][0])
    assert [m["role"] for m in loaded] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert loaded[1]["tool_calls"][0]["name"] == "read_sheet"
    assert loaded[2] == {"role": "tool", "content": "Friday 09:40 LIS", "tool_call_id": "call_1"}


def test_a_thousand_message_session_paints(pages: dict[str, Any]) -> None:
    page = pages["big"]
    _clean(page)
    # session_start, then the one turn's events.
    assert len(page["read"]["events"]) >= 4
    assert len(page["read"]["turn_messages"]) > 2
    timings = page["timings"]
    for view, shown in (("session", "timeline and event log"), ("turn", "turn")):
        print(
            f"\n1,000-message session, {view} page: first contentful paint "
            f"{timings[f'{view}: first contentful paint']:.0f} ms, {shown} rendered "
            f"{timings[view]:.0f} ms after navigation"
        )


def test_a_refused_credential_shows_nothing_and_asks_again(pages: dict[str, Any]) -> None:
    page = pages["refused"]
    [error] = page["read"]["error"]
    assert error.startswith("UNAUTHENTICATED") and "credential was refused" in error


@pytest.mark.parametrize("visit", ["foreign", "foreign_turn"])
def test_another_tenants_session_is_not_found(pages: dict[str, Any], visit: str) -> None:
    page = pages[visit]
    [error] = page["read"]["error"]
    assert error.startswith("NOT_FOUND")
    assert page["read"]["main"] == [""]


def test_a_service_key_reads_a_user_of_its_tenant(pages: dict[str, Any]) -> None:
    assert pages["service"]["read"]["titles"] == [BIG, TRIP]


async def test_the_route_refuses_other_methods_and_paths(data: Data) -> None:
    async with aiohttp.ClientSession() as http:
        base = f"http://{data.web}/inspect"
        async with http.get(base, allow_redirects=False) as moved:
            assert (moved.status, moved.headers["Location"]) == (308, "/inspect/")
        async with http.post(base + "/") as posted:
            assert (posted.status, posted.headers["Allow"]) == (405, "GET, HEAD")
        for unknown in ("/app.js.map", "/index.html", "/sub/app.js"):
            async with http.get(base + unknown) as missing:
                assert missing.status == 404, unknown
        async with http.get(base + "/app.js") as script:
            assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
            assert len(await script.read()) > 1000
