"""The scenario layer's template on a live server: the scenario named like the host when
the session names none, asking for no scenario, and missing template variables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, prompts_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb

from tests.support.status import violation_details

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.prompts = prompts_pb2_grpc.PromptServiceStub(channel)


@pytest.fixture(scope="module")
def api(address: str) -> Iterator[Stubs]:
    with grpc.insecure_channel(address) as channel:
        yield Stubs(channel)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def template(api: Stubs, scenario: str, text: str) -> None:
    api.prompts.UpsertTemplate(ppb.UpsertTemplateRequest(scenario=scenario, system_prompt=text))


def skill(api: Stubs, name: str, prompt: str, host: str) -> None:
    api.prompts.UpsertSkill(
        ppb.UpsertSkillRequest(skill=ppb.Skill(name=name, prompt=prompt, apps=[host], enabled=True))
    )


def build(api: Stubs, uid: str, sid: str, **session: Any) -> pb.BuildMessagesResponse:
    return api.context.BuildMessages(
        pb.BuildMessagesRequest(
            user_message="hi",
            token_budget=4000,
            session=pb.SessionContext(user_id=uid, session_id=sid, **session),
        )
    )


def new_session(api: Stubs, **fields: Any) -> tuple[str, str]:
    uid = unique("user")
    request = spb.CreateSessionRequest(user_id=uid, **fields)
    return uid, api.sessions.CreateSession(request).session.id


def scenario_layer(reply: pb.BuildMessagesResponse) -> pb.ContextLayerReport:
    return next(x for x in reply.report.context_layers if x.name == "scenario")


@pytest.fixture(scope="module")
def host(api: Stubs) -> str:
    """A host with a template named like it in other letter case."""
    name = unique("calc")
    template(api, name.upper(), "You help in the spreadsheet app.")
    return name


def test_host_without_scenario_uses_the_template_named_like_it(api: Stubs, host: str) -> None:
    uid, sid = new_session(api, host=host.capitalize())
    reply = build(api, uid, sid)
    assert "You help in the spreadsheet app." in reply.messages[0].content
    layer = scenario_layer(reply)
    assert layer.included and layer.items_kept == 1
    assert layer.note == f"scenario {host.upper()!r}, named like the host"


def test_host_of_the_request_also_implies_the_scenario(api: Stubs, host: str) -> None:
    uid, sid = new_session(api)
    assert "spreadsheet" not in build(api, uid, sid).messages[0].content
    assert "spreadsheet" in build(api, uid, sid, host=host).messages[0].content


def test_named_scenario_wins_over_the_host(api: Stubs, host: str) -> None:
    other = unique("other")
    template(api, other, "You write letters.")
    uid, sid = new_session(api, host=host, scenario=other)
    system = build(api, uid, sid).messages[0].content
    assert "You write letters." in system and "spreadsheet" not in system


def test_dash_asks_for_no_scenario(api: Stubs, host: str) -> None:
    uid, sid = new_session(api, host=host, scenario="-")
    reply = build(api, uid, sid)
    assert "spreadsheet" not in reply.messages[0].content
    layer = scenario_layer(reply)
    assert not layer.included and layer.note == ""
    # The request can ask for none too, for a session that has the host only.
    uid, sid = new_session(api, host=host)
    assert "spreadsheet" not in build(api, uid, sid, scenario="-").messages[0].content


def test_no_template_can_be_named_dash(api: Stubs) -> None:
    with pytest.raises(grpc.RpcError) as err:
        template(api, "-", "never used")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in violation_details(err.value)] == ["scenario"]


def test_missing_variable_reported_once_naming_who_needs_it(api: Stubs) -> None:
    host, scenario = unique("sheets"), unique("formulas")
    template(api, scenario, "For the sheet {{sheet}} and again {{sheet}}.")
    first, second = unique("a-sumif"), unique("b-charts")
    skill(api, first, "Use {{sheet}} in {{lang}}.", host)
    skill(api, second, "Chart {{sheet}}.", host)
    uid, sid = new_session(api, host=host, scenario=scenario)
    with pytest.raises(grpc.RpcError) as err:
        build(api, uid, sid)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_details(err.value) == [
        (
            "session.variables.sheet",
            f"no value; needed by the template, skill {first!r} and skill {second!r}",
        ),
        ("session.variables.lang", f"no value; needed by skill {first!r}"),
    ]
    reply = build(api, uid, sid, variables={"sheet": "Q3", "lang": "fr"})
    assert "For the sheet Q3 and again Q3." in reply.messages[0].content
