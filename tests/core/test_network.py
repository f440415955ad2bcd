"""Which addresses the server treats as reachable from other machines (for the warnings
and refusals of plain-text and unauthenticated listeners)."""

from __future__ import annotations

import pytest
from contextd.config import Settings
from contextd.core.network import exposed_hosts, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.1.2.3", False),
        ("contextd.example.test", False),
    ],
)
def test_which_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_listen_hosts_other_machines_may_reach() -> None:
    assert exposed_hosts(Settings(host="127.0.0.1", web_port=0).listen_hosts()) == []
    assert exposed_hosts(Settings(host="0.0.0.0").listen_hosts()) == ["0.0.0.0"]
    exposed = Settings(host="10.1.2.3", web_port=0, web_host="0.0.0.0")
    assert exposed_hosts(exposed.listen_hosts()) == ["10.1.2.3", "0.0.0.0"]
    web_only = Settings(host="127.0.0.1", web_port=0, web_host="10.1.2.3")
    assert exposed_hosts(web_only.listen_hosts()) == ["10.1.2.3"]
    web_off = Settings(host="127.0.0.1", web_port=-1, web_host="10.1.2.3")
    assert exposed_hosts(web_off.listen_hosts()) == []
