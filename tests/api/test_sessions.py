"""Sessions, memories, prompts, Collect and session-mode BuildMessages on a live server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, prompts_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb

from tests.support import scenarios
from tests.support.status import violations

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self.prompts = prompts_pb2_grpc.PromptServiceStub(channel)


@pytest.fixture(scope="module")
def api(address: str) -> Iterator[Stubs]:
    with grpc.insecure_channel(address) as channel:
        yield Stubs(channel)


def new_user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def user(text: str) -> pb.Message:
    return pb.Message(role=pb.ROLE_USER, content=text)


def assistant(text: str) -> pb.Message:
    return pb.Message(role=pb.ROLE_ASSISTANT, content=text)


def create(api: Stubs, uid: str, **fields: Any) -> spb.Session:
    return api.sessions.CreateSession(spb.CreateSessionRequest(user_id=uid, **fields)).session


def append(api: Stubs, uid: str, sid: str, *messages: pb.Message) -> list[spb.SessionMessage]:
    reply = api.sessions.AppendMessages(
        spb.AppendMessagesRequest(user_id=uid, session_id=sid, messages=list(messages))
    )
    return list(reply.messages)


def build(api: Stubs, uid: str, sid: str, text: str, **session: Any) -> pb.BuildMessagesResponse:
    budget = session.pop("token_budget", 4000)
    return api.context.BuildMessages(
        pb.BuildMessagesRequest(
            user_message=text,
            token_budget=budget,
            session=pb.SessionContext(user_id=uid, session_id=sid, **session),
        )
    )


def code_of(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code()  # type: ignore[no-any-return]


# --- session mode: context layers, stored conversation, Collect -----------------------------------


@pytest.fixture(scope="module")
def excel_setup(api: Stubs) -> dict[str, Any]:
    """A user with a template, skills, memories, an older session and a current one."""
    scenario = f"excel-formula-{uuid.uuid4().hex[:6]}"
    api.prompts.UpsertTemplate(
        ppb.UpsertTemplateRequest(
            scenario=scenario,
            system_prompt="You write Excel formulas for the sheet {{sheet}}.",
        )
    )
    suffix = uuid.uuid4().hex[:6]
    for name, apps in ((f"formulas-{suffix}", ["excel"]), (f"styles-{suffix}", ["word"])):
        api.prompts.UpsertSkill(
            ppb.UpsertSkillRequest(
                skill=ppb.Skill(
                    name=name,
                    description=f"skill {name}",
                    prompt=f"Use {name}.",
                    apps=apps,
                    enabled=True,
                )
            )
        )
    uid = new_user()
    for fact in ("用户每天早上都喝咖啡", "The user prefers short answers", "用户住在上海"):
        api.memory.AddMemory(mpb.AddMemoryRequest(user_id=uid, content=fact))
    older = create(api, uid, title="Budget review", scenario=scenario, host="excel")
    api.sessions.SetSessionSummary(
        spb.SetSessionSummaryRequest(
            user_id=uid, session_id=older.id, summary="Built a SUMIF over Q3 costs"
        )
    )
    current = create(
        api, uid, title="Sales", scenario=scenario, host="excel", metadata={"workbook": "q4.xlsx"}
    )
    append(api, uid, current.id, user("总销售额怎么算?"), assistant("用 =SUM(B2:B100)。"))
    return {
        "uid": uid,
        "scenario": scenario,
        "session": current,
        "skills": (f"formulas-{suffix}", f"styles-{suffix}"),
    }


def test_full_assembly_order(api: Stubs, excel_setup: dict[str, Any]) -> None:
    s = excel_setup
    reply = build(
        api, s["uid"], s["session"].id, "我喜欢喝咖啡，按月汇总呢?", variables={"sheet": "Sales"}
    )
    roles = [m.role for m in reply.messages]
    assert roles == [pb.ROLE_SYSTEM, pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_USER]
    system = reply.messages[0].content
    marks = [
        "You are a helpful assistant.",  # [0]
        "for the sheet Sales.",  # [1] template, variable filled
        f"### {s['skills'][0]}",  # [1] the Excel skill
        "workbook: q4.xlsx",  # [2]
        "用户每天早上都喝咖啡",  # [3] relevant memory
        "Built a SUMIF over Q3 costs",  # [4] the other session
    ]
    positions = [system.index(m) for m in marks]
    assert positions == sorted(positions)
    assert s["skills"][1] not in system  # the Word skill is not for Excel
    assert reply.messages[-1].content == "我喜欢喝咖啡，按月汇总呢?"
    layers = {x.name: x for x in reply.report.context_layers}
    assert [x.name for x in reply.report.context_layers] == [
        "system",
        "scenario",
        "session",
        "memory",
        "recent_sessions",
        "window",
        "user_message",
    ]
    assert all(layers[n].included for n in layers)
    assert layers["window"].items_kept == 2
    assert layers["memory"].items_kept >= 1
    assert reply.report.total_tokens <= 4000


def test_missing_variable_names_it(api: Stubs, excel_setup: dict[str, Any]) -> None:
    s = excel_setup
    with pytest.raises(grpc.RpcError) as err:
        build(api, s["uid"], s["session"].id, "hi")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == ["session.variables.sheet"]


def test_degrades_without_memory(api: Stubs, excel_setup: dict[str, Any]) -> None:
    s = excel_setup
    reply = build(
        api,
        s["uid"],
        s["session"].id,
        "咖啡",
        variables={"sheet": "S"},
        memory=pb.MEMORY_MODE_OFF,
    )
    layers = {x.name: x for x in reply.report.context_layers}
    for name in ("memory", "recent_sessions"):
        assert not layers[name].included
        assert layers[name].note == "memory is off for this request"
    assert "用户每天早上都喝咖啡" not in reply.messages[0].content
    assert reply.messages[-1].content == "咖啡"


def test_new_session_keeps_memories(api: Stubs, excel_setup: dict[str, Any]) -> None:
    s = excel_setup
    fresh = create(api, s["uid"], scenario=s["scenario"], host="excel")
    assert fresh.id != s["session"].id and fresh.message_count == 0
    reply = build(api, s["uid"], fresh.id, "咖啡", variables={"sheet": "S"})
    assert [m.role for m in reply.messages] == [pb.ROLE_SYSTEM, pb.ROLE_USER]
    assert "用户每天早上都喝咖啡" in reply.messages[0].content


def test_budget_drops_window_then_recent_then_memory(
    api: Stubs, excel_setup: dict[str, Any]
) -> None:
    s = excel_setup
    full = build(api, s["uid"], s["session"].id, "咖啡", variables={"sheet": "S"})
    layers = {x.name: x for x in full.report.context_layers}
    fixed = sum(layers[n].tokens for n in ("system", "scenario", "session")) + 60
    tight = build(
        api, s["uid"], s["session"].id, "咖啡", variables={"sheet": "S"}, token_budget=fixed
    )
    tight_layers = {x.name: x for x in tight.report.context_layers}
    assert tight_layers["window"].items_kept == 0
    assert tight.report.total_tokens <= fixed
    assert tight_layers["memory"].items_kept >= tight_layers["recent_sessions"].items_kept


def test_collect(api: Stubs) -> None:
    uid = new_user()
    session = create(api, uid)
    question, answer = append(api, uid, session.id, user("Q?"), assistant("The answer is 42."))
    answer_id = answer.message.id
    for _ in range(2):  # idempotent
        reply = api.context.Collect(pb.CollectRequest(user_id=uid, message_id=answer_id))
        assert reply.is_collected and reply.message_id == answer_id
    listed = api.sessions.ListMessages(spb.ListMessagesRequest(user_id=uid, session_id=session.id))
    assert [m.is_collected for m in listed.messages] == [False, True]
    reply = api.context.Collect(
        pb.CollectRequest(user_id=uid, message_id=answer_id, uncollect=True)
    )
    assert not reply.is_collected
    remembered = api.context.Collect(
        pb.CollectRequest(user_id=uid, message_id=answer_id, remember=True)
    )
    assert remembered.is_collected and remembered.memory_id
    found = api.memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=uid, query="answer 42"))
    assert [r.memory.id for r in found.results] == [remembered.memory_id]
    assert found.results[0].memory.source_message_id == answer_id

    assert (
        code_of(lambda: api.context.Collect(pb.CollectRequest(user_id=uid, message_id="999999999")))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code_of(
            lambda: api.context.Collect(pb.CollectRequest(user_id=new_user(), message_id=answer_id))
        )
        == grpc.StatusCode.NOT_FOUND  # another user's: as if it did not exist
    )
    with pytest.raises(grpc.RpcError) as err:
        api.context.Collect(pb.CollectRequest(user_id=uid, message_id=question.message.id))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == ["message_id"]


def test_compression_summary_on_a_stored_session(api: Stubs) -> None:
    uid = new_user()
    session = create(api, uid)
    history = []
    for m in scenarios.PIPELINE_HISTORY:
        history.append(
            pb.Message(
                role={"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT, "tool": pb.ROLE_TOOL}[
                    m["role"]
                ],
                content=m.get("content", ""),
                tool_calls=[pb.ToolCall(**c) for c in m.get("tool_calls", [])],
                tool_call_id=m.get("tool_call_id", ""),
            )
        )
    stored = append(api, uid, session.id, *history)
    ids = [m.message.id for m in stored]
    api.sessions.AddCompressionSummary(
        spb.AddCompressionSummaryRequest(
            user_id=uid,
            session_id=session.id,
            message_ids=ids[:4],
            start_message_id=ids[0],
            summary=scenarios.PIPELINE_SUMMARY["summary"],
        )
    )
    reply = build(api, uid, session.id, "继续")
    contents = [m.content for m in reply.messages]
    assert contents[1] == "[Previous conversation summary]\n\n" + str(
        scenarios.PIPELINE_SUMMARY["summary"]
    )
    assert contents[2:] == ["再执行 pwd", "", "/home/user", "继续"]
    assert reply.messages[3].tool_calls[0].id == "call_2"
    reasons = [(d.start_index, d.count, d.reason) for d in reply.report.dropped]
    assert reasons == [(0, 4, pb.DROP_REASON_COMPRESSED), (7, 1, pb.DROP_REASON_EMPTY)]


def test_pagination(api: Stubs) -> None:
    uid = new_user()
    made = [create(api, uid, title=f"s{i}").id for i in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = api.sessions.ListSessions(
            spb.ListSessionsRequest(user_id=uid, page_size=2, page_token=token)
        )
        seen += [s.id for s in page.sessions]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(reversed(made))
    append(api, uid, made[0], *[user(f"m{i}") for i in range(7)])
    contents: list[str] = []
    token = ""
    while True:
        page = api.sessions.ListMessages(
            spb.ListMessagesRequest(user_id=uid, session_id=made[0], page_size=3, page_token=token)
        )
        contents += [m.message.content for m in page.messages]
        token = page.next_page_token
        if not token:
            break
    assert contents == [f"m{i}" for i in range(7)]


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (spb.ListSessionsRequest(user_id="u", page_size=1000), "page_size"),
        (spb.ListSessionsRequest(user_id="u", page_token="garbage"), "page_token"),
        (spb.ListSessionsRequest(user_id=""), "user_id"),
        (spb.ListSessionsRequest(user_id="has space"), "user_id"),
    ],
)
def test_bad_list_requests(api: Stubs, request_: spb.ListSessionsRequest, field: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        api.sessions.ListSessions(request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == [field]


def test_bad_append_stores_nothing(api: Stubs) -> None:
    uid = new_user()
    session = create(api, uid)
    append(api, uid, session.id, user("kept"))
    with pytest.raises(grpc.RpcError) as err:
        append(api, uid, session.id, user("fine"), pb.Message(role=pb.ROLE_TOOL, content="r"))
    assert violations(err.value) == ["messages[1].tool_call_id"]
    listed = api.sessions.ListMessages(spb.ListMessagesRequest(user_id=uid, session_id=session.id))
    assert [m.message.content for m in listed.messages] == ["kept"]


def test_tenancy(api: Stubs) -> None:
    alice, bob = new_user(), new_user()
    session = create(api, alice)
    [stored] = append(api, alice, session.id, assistant("secret answer"))
    memory = api.memory.AddMemory(mpb.AddMemoryRequest(user_id=alice, content="alice likes tea"))
    # Another user's session, message or memory is answered as unknown.
    denied = grpc.StatusCode.NOT_FOUND
    calls = [
        lambda: api.sessions.GetSession(spb.GetSessionRequest(user_id=bob, session_id=session.id)),
        lambda: api.sessions.DeleteSession(
            spb.DeleteSessionRequest(user_id=bob, session_id=session.id)
        ),
        lambda: append(api, bob, session.id, user("intrusion")),
        lambda: api.sessions.ListMessages(
            spb.ListMessagesRequest(user_id=bob, session_id=session.id)
        ),
        lambda: api.sessions.SetSessionSummary(
            spb.SetSessionSummaryRequest(user_id=bob, session_id=session.id, summary="x")
        ),
        lambda: api.memory.DeleteMemory(
            mpb.DeleteMemoryRequest(user_id=bob, memory_id=memory.memory.id)
        ),
        lambda: api.context.Collect(pb.CollectRequest(user_id=bob, message_id=stored.message.id)),
        lambda: build(api, bob, session.id, "hi"),
    ]
    for call in calls:
        assert code_of(call) == denied
    assert api.sessions.ListSessions(spb.ListSessionsRequest(user_id=bob)).sessions == []
    assert api.memory.ListMemories(mpb.ListMemoriesRequest(user_id=bob)).memories == []
    found = api.memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=bob, query="tea"))
    assert list(found.results) == []
    # Alice's data is untouched.
    listed = api.sessions.ListMessages(
        spb.ListMessagesRequest(user_id=alice, session_id=session.id)
    )
    assert [m.message.content for m in listed.messages] == ["secret answer"]
    assert len(api.memory.ListMemories(mpb.ListMemoriesRequest(user_id=alice)).memories) == 1


def test_delete_session_keeps_memories(api: Stubs) -> None:
    uid = new_user()
    session = create(api, uid)
    append(api, uid, session.id, user("hello"))
    api.memory.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="likes jazz"))
    api.sessions.DeleteSession(spb.DeleteSessionRequest(user_id=uid, session_id=session.id))
    assert (
        code_of(
            lambda: api.sessions.GetSession(
                spb.GetSessionRequest(user_id=uid, session_id=session.id)
            )
        )
        == grpc.StatusCode.NOT_FOUND
    )
    assert len(api.memory.ListMemories(mpb.ListMemoriesRequest(user_id=uid)).memories) == 1


def test_duplicate_memory_stored_once(api: Stubs) -> None:
    uid = new_user()
    first = api.memory.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="Likes  Jazz"))
    again = api.memory.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="likes jazz"))
    assert first.created and not again.created
    assert again.memory.id == first.memory.id


async def test_hundred_concurrent_writers_lose_nothing(address: str) -> None:
    uid = new_user()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        sessions = await asyncio.gather(
            *[stub.CreateSession(spb.CreateSessionRequest(user_id=uid)) for _ in range(100)]
        )

        async def writer(sid: str) -> None:
            for i in range(10):
                await stub.AppendMessages(
                    spb.AppendMessagesRequest(
                        user_id=uid, session_id=sid, messages=[user(f"{sid}-{i}")]
                    )
                )

        await asyncio.gather(*[writer(s.session.id) for s in sessions])
        for s in sessions:
            listed = await stub.ListMessages(
                spb.ListMessagesRequest(user_id=uid, session_id=s.session.id, page_size=50)
            )
            assert [m.message.content for m in listed.messages] == [
                f"{s.session.id}-{i}" for i in range(10)
            ]
            assert [m.seq for m in listed.messages] == list(range(10))
