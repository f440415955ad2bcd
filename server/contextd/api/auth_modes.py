"""The ``--auth`` modes: checked with the other settings when the server starts
(``settings_errors``), and turned into the guard's authenticator once the database is
open."""

from __future__ import annotations

from collections.abc import Callable

from contextd.api.api_key_auth import ApiKeyAuthenticator
from contextd.api.auth import Authenticator
from contextd.api.jwt_auth import JwtAuthenticator
from contextd.config import Settings
from contextd.core.network import exposed_hosts
from contextd.store.api_keys import ApiKeyRepo
from contextd.store.engine.database import Database

MODES = ("none", "api-key", "jwt")

# What a mode needs to check credentials, given the open database.
AuthenticatorFactory = Callable[[Database], Authenticator]


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


def authenticator_factory(settings: Settings) -> AuthenticatorFactory | None:
    """The authenticator ``settings.auth`` asks for (``settings_errors`` found none);
    None for ``none``. With ``jwt``, SystemExit naming the flag when its keys cannot be
    had."""
    if settings.auth == "none":
        return None
    if settings.auth == "api-key":
        return _api_keys
    if settings.auth == "jwt":
        try:
            tokens = JwtAuthenticator.from_settings(settings)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        return lambda db: tokens
    raise ValueError(f"--auth {settings.auth!r} is not a mode")  # settings_errors said so


def _api_keys(db: Database) -> Authenticator:
    keys = ApiKeyAuthenticator(ApiKeyRepo(db))
    db.user_erased.append(keys.forget_user)  # their keys are refused at once
    return keys
