"""Which browser origins may call the gRPC-Web port, and the Access-Control-* headers."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# What gRPC-Web and Connect clients send, Authorization for the caller identity that
# will replace the request's user_id, the trace context a traced page passes on
# (forwarded to the call as metadata like any custom header), and what the Anthropic
# SDKs send from a page besides x-* headers.
_BASE_REQUEST_HEADERS = (
    "content-type",
    "x-grpc-web",
    "x-user-agent",
    "grpc-timeout",
    "connect-protocol-version",
    "connect-timeout-ms",
    "authorization",
    "traceparent",
    "tracestate",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
)
# Custom metadata: any x-* header a client asks for in a preflight.
_CUSTOM_HEADER = re.compile(r"x-[a-z0-9][a-z0-9_.-]*")
EXPOSED_HEADERS = "grpc-status, grpc-message, grpc-status-details-bin"
PREFLIGHT_MAX_AGE_S = 7200
_PREFLIGHT_VARY = "Origin, Access-Control-Request-Headers, Access-Control-Request-Private-Network"
_ORIGIN = re.compile(r"(https?://[^/\s,]+|null)")


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    origins: frozenset[str]
    any_origin: bool = False

    @classmethod
    def parse(cls, raw: str) -> CorsPolicy:
        """From the ``cors_origins`` setting: comma-separated origins, ``*`` for any."""
        items = [item.strip().rstrip("/").lower() for item in raw.split(",") if item.strip()]
        if "*" in items:
            return cls(frozenset(), any_origin=True)
        bad = [item for item in items if not _ORIGIN.fullmatch(item)]
        if bad:
            raise ValueError(
                f"cors_origins: {', '.join(bad)} is not an origin "
                "(scheme://host[:port], e.g. https://localhost:3000)"
            )
        return cls(frozenset(items))

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin.rstrip("/").lower() in self.origins

    def response_headers(self, origin: str) -> dict[str, str]:
        """For a call from an allowed ``origin``."""
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": EXPOSED_HEADERS,
            "Vary": "Origin",
        }

    def preflight_headers(
        self, origin: str, requested: str, private_network: bool = False
    ) -> dict[str, str]:
        """For an OPTIONS preflight from an allowed ``origin``; ``requested`` is its
        Access-Control-Request-Headers, ``private_network`` whether it asked
        (Access-Control-Request-Private-Network: true) to reach this server on a private
        address from a public page."""
        asked = [h.strip().lower() for h in requested.split(",") if h.strip()]
        custom = [
            h for h in asked if h not in _BASE_REQUEST_HEADERS and _CUSTOM_HEADER.fullmatch(h)
        ]
        headers = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": ", ".join((*_BASE_REQUEST_HEADERS, *custom)),
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
            "Vary": _PREFLIGHT_VARY,
        }
        if private_network:
            headers["Access-Control-Allow-Private-Network"] = "true"
        return headers


def is_own_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether ``origin`` is this port's own (``scheme://host`` of the request), as for
    the inspector page it serves, addressed by an IP address or ``localhost``. Under any
    other name the origin must be listed in cors_origins: a name can be rebound to this
    address by whoever controls it, and its pages would then count as this origin."""
    if origin.rstrip("/").lower() != f"{scheme}://{host}".lower():
        return False
    hostname = urlsplit(origin).hostname or ""
    if hostname == "localhost":
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True
