"""/v1 from a browser page: the web port's CORS policy applies as to its other calls."""

from __future__ import annotations

import httpx

from tests.openai_http.conftest import MODEL, ORIGIN, Served

REQUEST = {"model": MODEL, "messages": [{"role": "user", "content": "from a page"}], "user": "pam"}


def test_a_preflight_from_an_allowed_origin_allows_the_call(served: Served) -> None:
    for path, method in [("/chat/completions", "POST"), ("/models", "GET")]:
        response = httpx.options(
            served.base_url + path,
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "authorization, content-type, x-contextd-session",
            },
        )
        assert response.status_code == 204
        assert method in response.headers["access-control-allow-methods"]
        allowed = response.headers["access-control-allow-headers"]
        assert "authorization" in allowed and "x-contextd-session" in allowed


def test_an_allowed_origin_reads_the_answer_and_its_session(served: Served) -> None:
    response = httpx.post(
        f"{served.base_url}/chat/completions",
        json=REQUEST,
        headers={"Origin": ORIGIN, "X-Contextd-Session": "new"},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "X-Contextd-Session-Id" in response.headers["access-control-expose-headers"]


def test_another_origin_is_refused_before_the_turn(served: Served) -> None:
    before = served.sessions("pam")
    response = httpx.post(
        f"{served.base_url}/chat/completions",
        json=REQUEST,
        headers={"Origin": "https://evil.example"},
        timeout=30,
    )
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "permission_error"
    assert "access-control-allow-origin" not in response.headers
    assert served.sessions("pam") == before
