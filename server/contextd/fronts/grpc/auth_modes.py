"""The ``--auth`` modes, checked with the other settings when the server starts (the
composition root turns the chosen one into the guard's authenticator)."""

from __future__ import annotations

from contextd.config import Settings
from contextd.core.network import exposed_hosts

MODES = ("none", "api-key", "jwt")


def settings_errors(settings: Settings) -> list[str]:
    """What makes ``settings.auth`` unusable, before anything starts: a mode that is none
    of MODES, or ``none`` where it would be exposed."""
    if settings.auth not in MODES:
        return [f"--auth {settings.auth!r} is not a mode; choose one of {', '.join(MODES)}"]
    exposed = exposed_hosts(settings.listen_hosts())
    if settings.auth == "none" and exposed and not settings.allow_unauthenticated:
        # Without credentials, anyone who reaches the port is any user: only loopback is
        # allowed unless something in front checks callers.
        return [
            f"refusing to listen on {exposed[0]} with --auth none: anyone who reaches it "
            "could act as any user. Use --auth api-key or jwt, a loopback address, or "
            "--allow-unauthenticated if something in front of contextd checks callers."
        ]
    return []
