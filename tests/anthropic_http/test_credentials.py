"""/v1/messages under --auth api-key: the SDK's ``x-api-key`` (or its bearer token) is
the contextd key, checked by the native server as on every port; a refused call stores
nothing."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from tests.anthropic_http.conftest import MODEL, VERSION, keyed_url
from tests.openai_http.conftest import Keyed
from tests.openai_http.test_credentials import REFUSED, sessions
from tests.support.keyed_server import UNKNOWN_KEY

BODY = {"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "x"}]}


def ask(c: anthropic.Anthropic, text: str, **extra: object) -> anthropic.types.Message:
    return c.messages.create(
        model=MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": text}],
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("by", ["api_key", "auth_token"])
def test_a_key_acts_as_its_user_sent_either_way(keyed: Keyed, by: str) -> None:
    with anthropic.Anthropic(
        base_url=keyed_url(keyed), max_retries=0, **{by: keyed.server.alice}
    ) as c:
        answer = ask(c, "I am alice", extra_headers={"X-Contextd-Session": "new"})
        assert c.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "x"}])
    session_id = (answer.model_extra or {})["contextd"]["session_id"]
    owned = [s.user_id for s in sessions(keyed, keyed.server.alice) if s.id == session_id]
    assert owned == ["alice"]
    assert session_id not in {s.id for s in sessions(keyed, keyed.server.bob)}


@pytest.mark.parametrize(
    "key",
    ["", UNKNOWN_KEY, "not-a-key", b"\xc3\xa9t\xc3\xa9", b"\xff\xfe"],
    ids=["none", "unknown", "garbage", "not ascii", "not utf-8"],
)
def test_a_refused_credential_is_401_and_stores_nothing(keyed: Keyed, key: str | bytes) -> None:
    before = len(sessions(keyed, keyed.server.alice))
    sent = key if isinstance(key, bytes) else key.encode()
    headers = {k.encode(): v.encode() for k, v in VERSION.items()}
    if sent:
        headers[b"x-api-key"] = sent
    for path, body in [
        ("/v1/messages", BODY),
        ("/v1/messages", {**BODY, "stream": True}),
        ("/v1/messages/count_tokens", {"model": MODEL, "messages": BODY["messages"]}),
        # Bodies refused anyway: the credential is what the caller learns about.
        ("/v1/messages", {"model": MODEL}),
        ("/v1/messages/count_tokens", {"frobnicate": 1}),
    ]:
        response = httpx.post(keyed_url(keyed) + path, json=body, headers=headers, timeout=30)
        assert response.status_code == 401, (path, response.text)
        assert response.json() == {
            "type": "error",
            "error": {"type": "authentication_error", "message": REFUSED},
        }
    assert len(sessions(keyed, keyed.server.alice)) == before


def test_the_sdk_raises_its_authentication_error(keyed: Keyed) -> None:
    with (
        anthropic.Anthropic(base_url=keyed_url(keyed), api_key=UNKNOWN_KEY, max_retries=0) as c,
        pytest.raises(anthropic.AuthenticationError),
    ):
        ask(c, "hello")


def test_a_key_cannot_name_another_user(keyed: Keyed) -> None:
    with (
        anthropic.Anthropic(
            base_url=keyed_url(keyed), api_key=keyed.server.alice, max_retries=0
        ) as c,
        pytest.raises(anthropic.PermissionDeniedError) as refused,
    ):
        ask(c, "as bob", metadata={"user_id": "bob"})
    assert refused.value.body["error"]["type"] == "permission_error"  # type: ignore[index]
    assert sessions(keyed, keyed.server.bob) == []


def test_the_user_header_goes_before_metadata(keyed: Keyed) -> None:
    """Hosts on Claude Code put an identifier of their own in metadata.user_id."""
    with anthropic.Anthropic(
        base_url=keyed_url(keyed), api_key=keyed.server.alice, max_retries=0
    ) as c:
        answer = ask(
            c,
            "from a host",
            metadata={"user_id": "user_0a1b_account_session_9"},
            extra_headers={"X-Contextd-User": "alice", "X-Contextd-Session": "new"},
        )
        with pytest.raises(anthropic.PermissionDeniedError):
            ask(c, "as bob", extra_headers={"X-Contextd-User": "bob"})
    session_id = (answer.model_extra or {})["contextd"]["session_id"]
    assert session_id in {s.id for s in sessions(keyed, keyed.server.alice)}


def test_another_users_session_is_refused_and_unchanged(keyed: Keyed) -> None:
    bob = anthropic.Anthropic(base_url=keyed_url(keyed), api_key=keyed.server.bob, max_retries=0)
    with bob as c:
        made = c.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=20,
            messages=[{"role": "user", "content": "bob's plan"}],
            extra_headers={"X-Contextd-Session": "new"},
        )
    session_id = made.headers["x-contextd-session-id"]
    [before] = [s for s in sessions(keyed, keyed.server.bob) if s.id == session_id]
    with (
        anthropic.Anthropic(
            base_url=keyed_url(keyed), api_key=keyed.server.alice, max_retries=0
        ) as c,
        pytest.raises(anthropic.NotFoundError),
    ):
        ask(c, "show me", extra_headers={"X-Contextd-Session": session_id})
    [after] = [s for s in sessions(keyed, keyed.server.bob) if s.id == session_id]
    assert after.message_count == before.message_count == 2
