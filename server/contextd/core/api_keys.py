"""API key strings: how one is made, read back and checked. Pure, no I/O.

A key reads ``ctxd_<id>_<secret>``. The id is public: it is the row's primary key and
what logs name. Only a hash of the secret is stored; the secret is a 256-bit random
value, so a plain SHA-256 is enough (no password stretching needed for a secret nobody
chose) and a leaked table lets nobody call the server.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

KEY_PREFIX = "ctxd"
_KEY = re.compile(rf"{KEY_PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{43}})")


@dataclass(frozen=True, slots=True)
class KeyParts:
    key_id: str
    secret: str

    @property
    def token(self) -> str:
        """The string a caller sends as its bearer credential."""
        return f"{KEY_PREFIX}_{self.key_id}_{self.secret}"


def new_key() -> KeyParts:
    return KeyParts(secrets.token_hex(6), secrets.token_urlsafe(32))


def parse_key(token: str) -> KeyParts | None:
    """The parts of a well-formed key string; None for anything else."""
    match = _KEY.fullmatch(token)
    return KeyParts(match[1], match[2]) if match else None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    """Constant time, so timing tells a caller nothing about the stored hash."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)
