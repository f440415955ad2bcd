"""The deployment's secrets (the ``server_secrets`` table): each made once, by the first
server that needs it, and the same for every replica sharing the database ever after."""

from __future__ import annotations

import secrets
import time

from contextd.store.engine.database import Database

IDS = "ids"
# The ids' key: an AES-256 key (fronts/grpc/convert.py makes the ids callers see with it).
KEY_BYTES = 32
_READ = "SELECT value FROM server_secrets WHERE name = ?"


async def id_key(db: Database) -> bytes:
    """The key of the ids callers see (fronts/grpc/convert.py); made on the first call on a new
    database. Replicas starting together each offer one: the first insert wins and
    every replica reads the winner's."""
    rows = await db.reader.execute_fetchall(_READ, (IDS,))
    if not rows:
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (IDS, secrets.token_hex(KEY_BYTES), time.time()),
            )
            rows = await conn.execute_fetchall(_READ, (IDS,))
    key = bytes.fromhex(rows[0]["value"])
    if len(key) != KEY_BYTES:
        raise RuntimeError(f"server_secrets holds an {IDS!r} key of {len(key)} bytes")
    return key
