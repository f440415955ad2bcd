"""Who a translated call acts for: the fronts that translate a protocol into native calls
(the OpenAI API, MCP) pass the caller's credential on as it was received, so that the
native server authenticates, scopes to the tenant, limits and audits the call as any
other."""

from __future__ import annotations

from dataclasses import dataclass

# The HTTP headers a translated call passes on to the native call: the credential and
# the caller's trace; every other header belongs to HTTP or to the protocol.
FORWARDED_HEADERS = ("authorization", "traceparent", "tracestate")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a translated call acts for."""

    authorization: str = ""  # the Authorization header's value, as received
    user_id: str = ""  # "" for the credential's own user

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", self.authorization),) if self.authorization else ()
