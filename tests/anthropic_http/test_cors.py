"""/v1/messages from a browser page: the web port's CORS policy applies as to its other
calls, and lets the Anthropic SDK's own headers through."""

from __future__ import annotations

import httpx

from tests.anthropic_http.conftest import MODEL, VERSION, base_url
from tests.openai_http.conftest import ORIGIN, Served

REQUEST = {
    "model": MODEL,
    "max_tokens": 20,
    "messages": [{"role": "user", "content": "from a page"}],
    "metadata": {"user_id": "pam"},
}
SDK_HEADERS = (
    "x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access, "
    "content-type, x-stainless-lang, x-contextd-session"
)


def test_a_preflight_allows_the_sdks_headers(served: Served) -> None:
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = httpx.options(
            base_url(served) + path,
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": SDK_HEADERS,
            },
        )
        assert response.status_code == 204
        allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
        assert {h.strip() for h in SDK_HEADERS.split(",")} <= allowed


def test_an_allowed_origin_reads_the_answer_and_its_headers(served: Served) -> None:
    response = httpx.post(
        f"{base_url(served)}/v1/messages",
        json=REQUEST,
        headers={"Origin": ORIGIN, "X-Contextd-Session": "new", "x-api-key": "k", **VERSION},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    exposed = response.headers["access-control-expose-headers"]
    for name in ("X-Contextd-Session-Id", "X-Contextd-Report", "request-id"):
        assert name in exposed


def test_another_origin_is_refused_before_the_turn(served: Served) -> None:
    before = served.sessions("pam")
    response = httpx.post(
        f"{base_url(served)}/v1/messages",
        json=REQUEST,
        headers={"Origin": "https://evil.example", "x-api-key": "k", **VERSION},
        timeout=30,
    )
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "permission_error"
    assert "access-control-allow-origin" not in response.headers
    assert served.sessions("pam") == before
