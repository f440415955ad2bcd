"""``--auth api-key``: a bearer token is an API key from the keys table.

A key's row is kept for half a second (``KEY_ROW_TTL_S``) after it was read, so a busy
key costs one primary-key SELECT per half second instead of one per call. A key erased
with its user (DeleteUser) is forgotten at once by the process that erased it: a call
that process starts after DeleteUser answered is refused. Every other process on the
database (a replica, or the server when ``contextd keys revoke`` ran beside it) reads
the key's row again within ``KEY_ROW_TTL_S`` of the change. An expiry is checked on
every call. Only keys that exist are kept, so calls with made-up ids cannot fill the
cache. ``last_used_at`` is written at most once a minute per key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from contextd.core.api_keys import parse_key, secret_matches
from contextd.core.errors import Unauthenticated
from contextd.core.identity import Identity

log = logging.getLogger("contextd.auth")

LAST_USED_EVERY_S = 60.0
KEY_ROW_TTL_S = 0.5


class StoredKey(Protocol):
    @property
    def secret_hash(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def service(self) -> bool: ...
    def usable_at(self, now: float) -> bool: ...


class KeyStore(Protocol):
    async def get(self, key_id: str) -> StoredKey | None: ...
    async def mark_used(self, key_id: str, at: float) -> None: ...


class ApiKeyAuthenticator:
    def __init__(
        self,
        keys: KeyStore,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._clock = clock
        self._monotonic = monotonic
        self._rows: dict[str, tuple[float, StoredKey]] = {}
        self._last_marked: dict[str, float] = {}
        # Counts erasures: a row read while one committed is not kept.
        self._erasures = 0

    def forget_user(self, tenant_id: str, user_id: str) -> None:
        """Drop the kept rows of the user's keys: they were just erased."""
        self._erasures += 1
        for key_id, (_, key) in list(self._rows.items()):
            if key.tenant_id == tenant_id and key.user_id == user_id:
                del self._rows[key_id]

    async def authenticate(self, token: str) -> Identity:
        parts = parse_key(token)
        if parts is None:
            raise Unauthenticated()
        key = await self._key(parts.key_id)
        now = self._clock()
        # The secret is checked even for a key that is unusable anyway, so an answer's
        # timing does not tell a revoked key from a wrong secret.
        if key is None or not secret_matches(parts.secret, key.secret_hash):
            raise Unauthenticated()
        if not key.usable_at(now):
            raise Unauthenticated()
        if now - self._last_marked.get(parts.key_id, 0.0) >= LAST_USED_EVERY_S:
            self._last_marked[parts.key_id] = now
            try:
                await self._keys.mark_used(parts.key_id, now)
            except Exception:
                # A note of when a key was used must not fail the call it was used for.
                log.warning("could not note last use of key", extra={"credential": parts.key_id})
        return Identity(key.user_id, key.tenant_id, key.service, parts.key_id)

    async def _key(self, key_id: str) -> StoredKey | None:
        read_at = self._monotonic()
        cached = self._rows.get(key_id)
        if cached is not None and read_at - cached[0] < KEY_ROW_TTL_S:
            return cached[1]
        erasures = self._erasures
        key = await self._keys.get(key_id)
        if key is None or erasures != self._erasures:
            self._rows.pop(key_id, None)
        else:
            self._rows[key_id] = (read_at, key)
        return key
