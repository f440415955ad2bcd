"""The add-in page in headless Chromium, from another origin, against a server started
with ``--auth api-key``: its bearer token goes through a real CORS preflight.

With the key every call succeeds as the key's user; without it every call fails with
UNAUTHENTICATED, which the page can read (the refusal carries the CORS headers too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.support.browser_harness import (
    PageResult,
    PageVisit,
    localhost_tls,
    page_server,
    require_browser,
    run_pages,
)
from tests.support.grpc_web import web_address
from tests.support.keyed_server import UNKNOWN_KEY, KeyedServer, keyed_server

SIGNED_IN = ["CreateSession", "StreamChat", "ListSessions"]


@dataclass
class Browsed:
    with_key: PageResult
    without_key: PageResult
    wrong_key: PageResult
    origin: str
    server: KeyedServer


@pytest.fixture(scope="module")
async def browsed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browsed]:
    require_browser()
    tls = localhost_tls(tmp_path_factory.mktemp("tls"))
    async with page_server(tls) as origin:
        data = tmp_path_factory.mktemp("browser-keys")
        with keyed_server(data, "--web-port", "0", "--cors-origins", origin) as server:
            endpoint = web_address(server.proc)

            def visit(token: str) -> PageVisit:
                return PageVisit("signed-in", origin, endpoint, "", token)

            # One browser per page: a browser caches a preflight's answer, so a second page
            # calling the same URLs would send none.
            pages = {
                name: (await run_pages({name: visit(token)}))[name]
                for name, token in (
                    ("with_key", server.alice),
                    ("without_key", ""),
                    ("wrong_key", UNKNOWN_KEY),
                )
            }
            yield Browsed(
                pages["with_key"], pages["without_key"], pages["wrong_key"], origin, server
            )
            assert not [e for e in server.proc.log_lines if e.get("level") == "ERROR"]


def _methods(page: PageResult) -> list[str]:
    assert page.report["failure"] is None, page.report["failure"]
    return [call["method"].rsplit("/", 1)[1] for call in page.report["calls"]]


def test_with_the_key_every_call_succeeds_as_the_keys_user(browsed: Browsed) -> None:
    page = browsed.with_key
    assert _methods(page) == SIGNED_IN
    assert [c for c in page.report["calls"] if "error" in c] == []
    session = page.call("SessionService/CreateSession")["response"]["session"]
    assert session["userId"] == "alice"
    completed = page.call("ChatService/StreamChat")["events"][-1]["turnCompleted"]
    assert completed["status"] == "TURN_STATUS_OK"
    listed = page.call("SessionService/ListSessions")["response"]["sessions"]
    assert [s["id"] for s in listed] == [session["id"]]
    # The server saw alice's key on every call, and never logs the secret itself.
    logged = [e for e in browsed.server.proc.logs("rpc") if e.get("user") == "alice"]
    assert len(logged) == len(SIGNED_IN)
    assert browsed.server.alice.split("_", 2)[2] not in str(browsed.server.proc.log_lines)


@pytest.mark.parametrize("which", ["without_key", "wrong_key"])
def test_without_a_valid_key_every_call_is_unauthenticated(browsed: Browsed, which: str) -> None:
    page = getattr(browsed, which)
    assert _methods(page) == SIGNED_IN
    errors = [call.get("error", {}).get("code") for call in page.report["calls"]]
    assert errors == ["UNAUTHENTICATED"] * len(SIGNED_IN)
    assert all("response" not in c and not c.get("events") for c in page.report["calls"])


def test_the_bearer_token_passed_a_real_cors_preflight(browsed: Browsed) -> None:
    page, origin = browsed.with_key, browsed.origin
    preflights, fetches = page.requests("Preflight"), page.requests("Fetch")
    assert len(fetches) == len(SIGNED_IN)
    assert all(
        (f["method"], f["status"], f["allowOrigin"]) == ("POST", 200, origin) for f in fetches
    )
    assert sorted(p["url"] for p in preflights) == sorted(f["url"] for f in fetches)
    for preflight in preflights:
        assert (preflight["method"], preflight["status"]) == ("OPTIONS", 204)
        assert preflight["allowOrigin"] == origin
        asked = {h.strip() for h in preflight["requestHeaders"].lower().split(",")}
        allowed = {h.strip() for h in preflight["allowHeaders"].lower().split(",")}
        assert "authorization" in asked  # the browser asked because of the bearer token
        assert asked <= allowed


@pytest.mark.parametrize("which", ["without_key", "wrong_key"])
def test_a_refused_page_passed_its_preflights_too(browsed: Browsed, which: str) -> None:
    page: PageResult = getattr(browsed, which)
    preflights, fetches = page.requests("Preflight"), page.requests("Fetch")
    assert len(fetches) == len(preflights) == len(SIGNED_IN), (preflights, fetches)
    # A refusal still carries the CORS headers, or the page could not read its status.
    assert all((f["status"], f["allowOrigin"]) == (200, browsed.origin) for f in fetches)
    for preflight in preflights:
        assert (preflight["status"], preflight["allowOrigin"]) == (204, browsed.origin)
        asked = {h.strip() for h in preflight["requestHeaders"].lower().split(",")}
        assert ("authorization" in asked) is (which == "wrong_key")
