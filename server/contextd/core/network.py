"""Which listen or fetch addresses stay on this machine."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only. An empty host listens on every
    interface, a name other than localhost may resolve anywhere: neither is."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposed_hosts(hosts: Iterable[str]) -> list[str]:
    """The hosts of ``hosts`` other machines may reach, each once, in order."""
    return [host for host in dict.fromkeys(hosts) if not is_loopback(host)]
