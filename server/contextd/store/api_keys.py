"""The API keys table: create, look up by id, list, revoke, note when a key was used.

The ``contextd keys`` commands write this table from a second process while the server
runs: SQLite's WAL and busy timeout let them, and the server keeps none of it cached,
so what they write is what its next lookup reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from contextd.core.api_keys import KeyParts, hash_secret, new_key
from contextd.core.identity import DEFAULT_TENANT, TENANT_ID_RULE, is_tenant_id
from contextd.store.engine.database import Database

_COLUMNS = (
    "id, secret_hash, name, user_id, tenant_id, service,"
    " created_at, expires_at, revoked_at, last_used_at"
)


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    secret_hash: str
    name: str
    user_id: str
    tenant_id: str
    service: bool
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None

    def usable_at(self, now: float) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


def _key_from_row(row: Any) -> ApiKey:
    return ApiKey(
        id=row["id"],
        secret_hash=row["secret_hash"],
        name=row["name"],
        user_id=row["user_id"],
        tenant_id=row["tenant_id"],
        service=bool(row["service"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


class ApiKeyRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        user_id: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
        service: bool = False,
        name: str = "",
        expires_at: float | None = None,
    ) -> tuple[ApiKey, KeyParts]:
        """A new key and its parts; the secret exists only in what this returns.

        Raises ValueError for a malformed tenant id (it would name a directory)."""
        if not is_tenant_id(tenant_id):
            raise ValueError(f"tenant id: {TENANT_ID_RULE}")
        parts = new_key()
        key = ApiKey(
            parts.key_id,
            hash_secret(parts.secret),
            name,
            user_id,
            tenant_id,
            service,
            time.time(),
            expires_at,
            None,
            None,
        )
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.secret_hash,
                    key.name,
                    key.user_id,
                    key.tenant_id,
                    int(key.service),
                    key.created_at,
                    key.expires_at,
                    None,
                    None,
                ),
            )
        return key, parts

    async def get(self, key_id: str) -> ApiKey | None:
        async with self._db.reader.execute(
            f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return _key_from_row(row) if row else None

    async def list(self) -> list[ApiKey]:
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id"
        )
        return [_key_from_row(row) for row in rows]

    async def revoke(self, key_id: str) -> bool:
        """Revoke the key; False if there is no such key. Revoking twice keeps the first time."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                (time.time(), key_id),
            )
        return cursor.rowcount > 0

    async def mark_used(self, key_id: str, at: float) -> None:
        async with self._db.transaction() as conn:
            await conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (at, key_id))
