"""Two tenants on one server (`--auth api-key`), each with a user named bob: neither sees
the other's sessions, messages, memories, summaries, event logs or template and skill
overrides; the other tenant's ids are NOT_FOUND; a service key acts inside its own
tenant only. Keys are made with the real `contextd keys create --tenant`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from contextd.config import Settings
from contextd.core.errors import Unauthenticated
from contextd.fronts.grpc.jwt_auth import JwtAuthenticator
from contextd.store.event_log.events import HISTORY_DIR
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import (
    chat_pb2_grpc,
    context_pb2_grpc,
    memory_pb2_grpc,
    prompts_pb2_grpc,
    sessions_pb2_grpc,
)
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb
from google.protobuf.field_mask_pb2 import FieldMask

from tests.support.auth import bearer, create_key, keys_command
from tests.support.jwks import AUDIENCE, ISSUER, SigningKey, claims, jwks, rsa_key
from tests.support.pg_databases import database_url_for
from tests.support.server import ServerProcess, start_server

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends

NOT_FOUND = grpc.StatusCode.NOT_FOUND


@dataclass
class Tenants:
    proc: ServerProcess
    data_dir: Path
    acme_bob: str
    globex_bob: str
    acme_carol: str
    globex_service: str
    operator: str  # a key of the default tenant


@pytest.fixture(scope="module")
def tenants(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> Iterator[Tenants]:
    data_dir = tmp_path_factory.mktemp("tenants")
    url = database_url_for(request, backend)
    database = ["--database-url", url] if url else []
    made = Tenants(
        proc=None,  # type: ignore[arg-type]
        data_dir=data_dir,
        acme_bob=create_key(data_dir, "bob", "--tenant", "acme", *database),
        globex_bob=create_key(data_dir, "bob", "--tenant", "globex", *database),
        acme_carol=create_key(data_dir, "carol", "--tenant", "acme", *database),
        globex_service=create_key(
            data_dir, "backend", "--tenant", "globex", "--service", *database
        ),
        operator=create_key(data_dir, "ops", *database),
    )
    made.proc = start_server(data_dir, "--auth", "api-key", database_url=url)
    yield made
    assert made.proc.stop() == 0


class Client:
    """The stubs of one server, every call with one key."""

    def __init__(self, channel: grpc.Channel, token: str) -> None:
        self.auth = bearer(token)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.prompts = prompts_pb2_grpc.PromptServiceStub(channel)

    def turn(self, question: str, session_id: str = "", user_id: str = "") -> list[Any]:
        request = cpb.StreamChatRequest(
            session=pb.SessionContext(
                session_id=session_id, user_id=user_id, scenario="excel", host="excel"
            ),
            user_message=question,
        )
        events = list(self.chat.StreamChat(request, metadata=self.auth))
        assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
        return events

    def build(self, session_id: str, user_message: str = "hi") -> str:
        """The system text a session-mode build gives (every layer in one message)."""
        built = self.context.BuildMessages(
            pb.BuildMessagesRequest(
                session=pb.SessionContext(session_id=session_id, scenario="excel", host="excel"),
                user_message=user_message,
                token_budget=8000,
            ),
            metadata=self.auth,
        )
        return "\n".join(m.content for m in built.messages if m.role == pb.ROLE_SYSTEM)

    def events(self, session_id: str, user_id: str = "") -> list[dict[str, Any]]:
        request = spb.ExportEventsRequest(session_id=session_id, user_id=user_id)
        return [
            json.loads(chunk.json)
            for chunk in self.sessions.ExportEvents(request, metadata=self.auth)
        ]


@pytest.fixture(scope="module")
def channel(tenants: Tenants) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(tenants.proc.address) as ch:
        yield ch


def code_of(call: Any, *args: Any, **kwargs: Any) -> grpc.StatusCode:
    try:
        result = call(*args, **kwargs)
        if hasattr(result, "__iter__") and not hasattr(result, "ListFields"):
            list(result)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_two_bobs_share_nothing(tenants: Tenants, channel: grpc.Channel, backend: str) -> None:
    acme, globex = Client(channel, tenants.acme_bob), Client(channel, tenants.globex_bob)
    started = acme.turn("acme bob asks about the quarterly walrus budget")
    acme_sid = started[0].turn_started.session_id
    acme_memory = acme.memory.AddMemory(
        mpb.AddMemoryRequest(content="acme bob keeps a walrus"), metadata=acme.auth
    ).memory
    acme.sessions.SetSessionSummary(
        spb.SetSessionSummaryRequest(session_id=acme_sid, summary="walrus budget talk"),
        metadata=acme.auth,
    )
    globex_sid = globex.turn("globex bob asks about penguins")[0].turn_started.session_id

    # Lists and searches: each bob sees his own tenant only.
    mine = acme.sessions.ListSessions(spb.ListSessionsRequest(), metadata=acme.auth)
    theirs = globex.sessions.ListSessions(spb.ListSessionsRequest(), metadata=globex.auth)
    assert [s.id for s in mine.sessions] == [acme_sid]
    assert [s.id for s in theirs.sessions] == [globex_sid]
    found = globex.memory.SearchMemories(
        mpb.SearchMemoriesRequest(query="walrus"), metadata=globex.auth
    )
    assert list(found.results) == []
    listed = globex.memory.ListMemories(mpb.ListMemoriesRequest(), metadata=globex.auth)
    assert "walrus" not in str(listed)
    hits = acme.memory.SearchMemories(mpb.SearchMemoriesRequest(query="walrus"), metadata=acme.auth)
    assert [m.memory.id for m in hits.results] == [acme_memory.id]

    # Summaries: acme's reaches acme bob's other sessions only.
    acme_next = acme.sessions.CreateSession(spb.CreateSessionRequest(), metadata=acme.auth)
    assert "walrus budget talk" in acme.build(acme_next.session.id)
    assert "walrus" not in globex.build(globex_sid, "walrus")

    # Event logs: each tenant's own; acme's log is not in globex's directory.
    assert any(e["type"] == "turn_start" for e in acme.events(acme_sid))
    assert any(e["type"] == "turn_start" for e in globex.events(globex_sid))
    if backend == "sqlite":  # PostgreSQL keeps them in a table, by tenant and session
        history = tenants.data_dir / HISTORY_DIR / "tenants"
        assert (history / "acme" / f"{acme_sid}.jsonl").is_file()
        assert (history / "globex" / f"{globex_sid}.jsonl").is_file()
        assert not (tenants.data_dir / HISTORY_DIR / f"{acme_sid}.jsonl").exists()


def test_another_tenants_ids_are_not_found(tenants: Tenants, channel: grpc.Channel) -> None:
    acme, globex = Client(channel, tenants.acme_bob), Client(channel, tenants.globex_bob)
    events = acme.turn("acme's private question")
    sid = events[0].turn_started.session_id
    answer_id = events[-1].turn_completed.assistant_message_id
    memory = acme.memory.AddMemory(
        mpb.AddMemoryRequest(content="acme secret memory"), metadata=acme.auth
    ).memory
    auth = globex.auth
    s = globex.sessions
    calls = {
        "GetSession": (s.GetSession, spb.GetSessionRequest(session_id=sid)),
        "ListMessages": (s.ListMessages, spb.ListMessagesRequest(session_id=sid)),
        "ExportEvents": (s.ExportEvents, spb.ExportEventsRequest(session_id=sid)),
        "SetSessionSummary": (
            s.SetSessionSummary,
            spb.SetSessionSummaryRequest(session_id=sid, summary="overwritten"),
        ),
        "AppendMessages": (
            s.AppendMessages,
            spb.AppendMessagesRequest(
                session_id=sid, messages=[pb.Message(role=pb.ROLE_USER, content="injected")]
            ),
        ),
        "AddCompressionSummary": (
            s.AddCompressionSummary,
            spb.AddCompressionSummaryRequest(
                session_id=sid, message_ids=[answer_id], start_message_id=answer_id, summary="x"
            ),
        ),
        "DeleteSession": (s.DeleteSession, spb.DeleteSessionRequest(session_id=sid)),
        "Collect": (
            globex.context.Collect,
            pb.CollectRequest(message_id=answer_id, remember=True),
        ),
        "DeleteMemory": (
            globex.memory.DeleteMemory,
            mpb.DeleteMemoryRequest(memory_id=memory.id),
        ),
        "UpdateMemory": (
            globex.memory.UpdateMemory,
            mpb.UpdateMemoryRequest(
                memory_id=memory.id,
                memory=mpb.Memory(content="overwritten"),
                update_mask=FieldMask(paths=["content"]),
            ),
        ),
        "ListMemoryHistory": (
            globex.memory.ListMemoryHistory,
            mpb.ListMemoryHistoryRequest(memory_id=memory.id),
        ),
    }
    for name, (call, request) in calls.items():
        assert code_of(call, request, metadata=auth) == NOT_FOUND, name
    assert code_of(globex.build, sid) == NOT_FOUND
    assert code_of(globex.turn, "continue acme's session", sid) == NOT_FOUND
    # So is it for another user of the same tenant.
    carol = Client(channel, tenants.acme_carol)
    denied = code_of(
        carol.sessions.GetSession, spb.GetSessionRequest(session_id=sid), metadata=carol.auth
    )
    assert denied == NOT_FOUND
    # Nothing of acme's changed.
    got = acme.sessions.ListMessages(spb.ListMessagesRequest(session_id=sid), metadata=acme.auth)
    assert [m.message.content for m in got.messages][-1] != "injected"
    assert not any(m.is_collected for m in got.messages)
    hits = acme.memory.SearchMemories(mpb.SearchMemoriesRequest(query="secret"), metadata=acme.auth)
    assert [m.memory.id for m in hits.results] == [memory.id]
    assert hits.results[0].memory.content == "acme secret memory"
    assert "overwritten" not in acme.build(
        acme.sessions.CreateSession(spb.CreateSessionRequest(), metadata=acme.auth).session.id
    )


def test_a_service_key_acts_inside_its_own_tenant(tenants: Tenants, channel: grpc.Channel) -> None:
    acme, service = Client(channel, tenants.acme_bob), Client(channel, tenants.globex_service)
    globex_bob = Client(channel, tenants.globex_bob)
    acme_sid = acme.turn("acme bob's question")[0].turn_started.session_id
    # Naming "bob", the service acts for bob of globex: it sees his sessions, not acme's.
    created = service.sessions.CreateSession(
        spb.CreateSessionRequest(user_id="bob", title="made by the service"), metadata=service.auth
    )
    assert created.session.user_id == "bob"
    listed = service.sessions.ListSessions(
        spb.ListSessionsRequest(user_id="bob"), metadata=service.auth
    )
    assert acme_sid not in [s.id for s in listed.sessions]
    assert created.session.id in [s.id for s in listed.sessions]
    mine = globex_bob.sessions.ListSessions(spb.ListSessionsRequest(), metadata=globex_bob.auth)
    assert created.session.id in [s.id for s in mine.sessions]
    request = spb.GetSessionRequest(session_id=acme_sid, user_id="bob")
    assert code_of(service.sessions.GetSession, request, metadata=service.auth) == NOT_FOUND
    assert code_of(service.turn, "hi", acme_sid, "bob") == NOT_FOUND


def test_templates_and_skills_are_overridden_per_tenant(
    tenants: Tenants, channel: grpc.Channel
) -> None:
    operator, acme = Client(channel, tenants.operator), Client(channel, tenants.acme_bob)
    globex = Client(channel, tenants.globex_bob)
    operator.prompts.UpsertTemplate(
        ppb.UpsertTemplateRequest(scenario="excel", system_prompt="SERVER-WIDE TEMPLATE"),
        metadata=operator.auth,
    )
    operator.prompts.UpsertSkill(
        ppb.UpsertSkillRequest(
            skill=ppb.Skill(name="charts", prompt="SERVER-WIDE CHARTS", enabled=True)
        ),
        metadata=operator.auth,
    )
    acme.prompts.UpsertTemplate(
        ppb.UpsertTemplateRequest(scenario="excel", system_prompt="ACME TEMPLATE"),
        metadata=acme.auth,
    )
    acme.prompts.UpsertSkill(
        ppb.UpsertSkillRequest(skill=ppb.Skill(name="charts", prompt="ACME CHARTS", enabled=True)),
        metadata=acme.auth,
    )
    acme.prompts.UpsertSkill(
        ppb.UpsertSkillRequest(
            skill=ppb.Skill(name="acme-only", prompt="ACME ONLY " * 200, enabled=True)
        ),
        metadata=acme.auth,
    )
    acme_sid = acme.sessions.CreateSession(spb.CreateSessionRequest(), metadata=acme.auth)
    globex_sid = globex.sessions.CreateSession(spb.CreateSessionRequest(), metadata=globex.auth)
    acme_text = acme.build(acme_sid.session.id)
    globex_text = globex.build(globex_sid.session.id)
    assert "ACME TEMPLATE" in acme_text and "ACME CHARTS" in acme_text
    assert "SERVER-WIDE" not in acme_text
    assert "SERVER-WIDE TEMPLATE" in globex_text and "SERVER-WIDE CHARTS" in globex_text
    assert "ACME" not in globex_text
    # A chat turn uses its tenant's templates and skills too: acme's long skill counts.
    system = {}
    for name, client, sid in (("acme", acme, acme_sid), ("globex", globex, globex_sid)):
        started = client.turn("hello", sid.session.id)[0].turn_started
        system[name] = started.context.system_tokens
    assert system["acme"] > system["globex"] + 300
    listed = globex.prompts.ListTemplates(ppb.ListTemplatesRequest(), metadata=globex.auth)
    assert [t.system_prompt for t in listed.templates] == ["SERVER-WIDE TEMPLATE"]
    skills = globex.prompts.ListSkills(ppb.ListSkillsRequest(), metadata=globex.auth)
    assert [s.prompt for s in skills.skills] == ["SERVER-WIDE CHARTS"]
    # Globex cannot delete the defaults nor acme's override.
    denied = code_of(
        globex.prompts.DeleteTemplate,
        ppb.DeleteTemplateRequest(scenario="excel"),
        metadata=globex.auth,
    )
    assert denied == NOT_FOUND
    # Acme deleting its override falls back to the default.
    acme.prompts.DeleteTemplate(ppb.DeleteTemplateRequest(scenario="excel"), metadata=acme.auth)
    acme.prompts.DeleteSkill(ppb.DeleteSkillRequest(name="charts"), metadata=acme.auth)
    again = acme.build(acme_sid.session.id)
    assert "SERVER-WIDE TEMPLATE" in again and "SERVER-WIDE CHARTS" in again


@pytest.mark.parametrize("tenant", ["../etc", "a/b", ".hidden", "x" * 129, "a b", ""])
def test_keys_create_refuses_a_tenant_id_that_is_not_a_plain_name(
    tmp_path: Path, tenant: str
) -> None:
    done = keys_command(tmp_path, "create", "--user", "bob", "--tenant", tenant)
    assert done.returncode != 0
    assert "--tenant" in done.stderr
    assert not done.stdout.strip()


@pytest.fixture(scope="module")
def signing_key() -> SigningKey:
    return rsa_key("rsa-tenants")


@pytest.fixture
def jwt_auth(tmp_path: Path, signing_key: SigningKey) -> JwtAuthenticator:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(signing_key)), encoding="utf-8")
    settings = Settings(jwt_jwks=str(path), jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    return JwtAuthenticator.from_settings(settings)


@pytest.mark.parametrize("tid", ["../../etc", "a/b", ".x", "x" * 129, "a b", "ü"])
async def test_a_token_whose_tenant_claim_is_not_a_plain_name_is_refused(
    jwt_auth: JwtAuthenticator, signing_key: SigningKey, tid: str
) -> None:
    with pytest.raises(Unauthenticated):
        await jwt_auth.authenticate(signing_key.sign(claims(tid=tid)))


async def test_an_entra_tenant_id_is_a_tenant(
    jwt_auth: JwtAuthenticator, signing_key: SigningKey
) -> None:
    tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    identity = await jwt_auth.authenticate(signing_key.sign(claims(tid=tid)))
    assert identity.tenant_id == tid


def test_tenants_differing_in_case_keep_their_logs_apart(tmp_path: Path) -> None:
    """Two tenants whose ids differ in case alone get two event-log directories whose
    names differ whatever the case: one directory on a filesystem that ignores case
    would hold both tenants' logs."""
    keys = {tenant: create_key(tmp_path, "bob", "--tenant", tenant) for tenant in ("Acme", "acme")}
    proc = start_server(tmp_path, "--auth", "api-key")
    try:
        with grpc.insecure_channel(proc.address) as channel:
            sessions = {}
            for tenant, key in keys.items():
                client = Client(channel, key)
                sessions[tenant] = client.turn(f"hello from {tenant}")[0].turn_started.session_id
            for tenant, key in keys.items():
                client = Client(channel, key)
                logged = client.events(sessions[tenant])
                assert logged[1]["content"] == f"hello from {tenant}"
                other = next(sid for name, sid in sessions.items() if name != tenant)
                assert code_of(client.events, other) == NOT_FOUND
    finally:
        assert proc.stop() == 0
    names = [p.name for p in (tmp_path / "history" / "tenants").iterdir()]
    assert len(names) == 2 and len({name.lower() for name in names}) == 2
