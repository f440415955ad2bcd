"""/v1 under --auth api-key: the SDK's api_key is the contextd key, checked by the native
server as on every port; a refused call stores nothing."""

from __future__ import annotations

import grpc
import httpx
import openai
import pytest
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc

from tests.openai_http.conftest import MODEL, Keyed
from tests.support.keyed_server import UNKNOWN_KEY

REFUSED = "a valid credential is required"


def client(keyed: Keyed, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=keyed.base_url, api_key=key, max_retries=0)


def sessions(keyed: Keyed, key: str) -> list[spb.Session]:
    with grpc.insecure_channel(keyed.server.address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        return list(
            stub.ListSessions(
                spb.ListSessionsRequest(page_size=200),
                metadata=(("authorization", f"Bearer {key}"),),
            ).sessions
        )


def ask(c: openai.OpenAI, text: str, **extra: object) -> openai.types.chat.ChatCompletion:
    return c.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": text}],
        **extra,  # type: ignore[arg-type]
    )


def test_a_key_acts_as_its_user(keyed: Keyed) -> None:
    with client(keyed, keyed.server.alice) as c:
        answer = ask(c, "I am alice", extra_headers={"X-Contextd-Session": "new"})
        assert [m.id for m in c.models.list().data] == [MODEL]
    session_id = (answer.model_extra or {})["contextd"]["session_id"]
    assert [s.user_id for s in sessions(keyed, keyed.server.alice) if s.id == session_id] == [
        "alice"
    ]
    assert session_id not in {s.id for s in sessions(keyed, keyed.server.bob)}


@pytest.mark.parametrize("key", ["", UNKNOWN_KEY, "not-a-key"], ids=["none", "unknown", "garbage"])
def test_a_refused_credential_is_401_and_stores_nothing(keyed: Keyed, key: str) -> None:
    before = len(sessions(keyed, keyed.server.alice))
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for method, path, body in [
        (
            "POST",
            "/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        ),
        ("GET", "/models", None),
        ("GET", f"/models/{MODEL}", None),
    ]:
        response = httpx.request(
            method, keyed.base_url + path, json=body, headers=headers, timeout=30
        )
        assert response.status_code == 401, (path, response.text)
        error = response.json()["error"]
        assert error["message"] == REFUSED and error["code"] == "invalid_api_key"
    assert len(sessions(keyed, keyed.server.alice)) == before


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"model": 1}', b'{"messages": [{"role": "user", "content": "\\ud800"}]}'],
    ids=["bad json", "bad field", "unpaired surrogate"],
)
def test_the_credential_is_checked_before_the_body(keyed: Keyed, body: bytes) -> None:
    for headers in ({}, {"Authorization": f"Bearer {UNKNOWN_KEY}"}):
        response = httpx.post(
            keyed.base_url + "/chat/completions",
            content=body,
            headers={**headers, "Content-Type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 401, response.text
        assert response.json()["error"]["message"] == REFUSED
    with_key = httpx.post(
        keyed.base_url + "/chat/completions",
        content=body,
        headers={
            "Authorization": f"Bearer {keyed.server.alice}",
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    assert with_key.status_code == 400, with_key.text


def test_the_sdk_raises_its_authentication_error(keyed: Keyed) -> None:
    with client(keyed, UNKNOWN_KEY) as c:
        with pytest.raises(openai.AuthenticationError):
            ask(c, "hello")
        with pytest.raises(openai.AuthenticationError):
            c.models.list()


def test_a_key_cannot_name_another_user(keyed: Keyed) -> None:
    with client(keyed, keyed.server.alice) as c, pytest.raises(openai.PermissionDeniedError):
        ask(c, "as bob", user="bob")
    assert sessions(keyed, keyed.server.bob) == []


def test_another_users_session_is_refused_and_unchanged(keyed: Keyed) -> None:
    with client(keyed, keyed.server.bob) as c:
        made = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "bob's plan"}],
            extra_headers={"X-Contextd-Session": "new"},
        )
    session_id = made.headers["x-contextd-session-id"]
    [before] = [s for s in sessions(keyed, keyed.server.bob) if s.id == session_id]
    with client(keyed, keyed.server.alice) as c, pytest.raises(openai.NotFoundError):
        ask(c, "show me", extra_headers={"X-Contextd-Session": session_id})
    [after] = [s for s in sessions(keyed, keyed.server.bob) if s.id == session_id]
    assert after.message_count == before.message_count == 2


@pytest.mark.parametrize(
    "value", [b"Bearer \xc3\xa9t\xc3\xa9", b"Bearer \xff\xfe"], ids=["utf-8", "not utf-8"]
)
def test_a_credential_that_is_not_ascii_is_401(keyed: Keyed, value: bytes) -> None:
    for method, path, body in [
        (
            "POST",
            "/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        ),
        ("GET", "/models", None),
    ]:
        response = httpx.request(
            method, keyed.base_url + path, json=body, headers={"Authorization": value}, timeout=30
        )
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"]["message"] == REFUSED
