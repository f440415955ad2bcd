"""Keyset pagination shared by the repositories: page sizes and opaque page tokens.

A page token is URL-safe base64 of a small JSON list: the listing's kind, a short hash of
what it lists (a user's sessions, one session's messages) and the sort key of the last item
returned. The next page starts strictly after that key, so rows inserted meanwhile never
shift it; a token handed to another listing, or garbled, is refused with ValueError.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_limit(page_size: int) -> int:
    """0 means the default size, above the maximum means the maximum; negative is refused."""
    if page_size < 0:
        raise ValueError(
            f"page_size must be >= 0 (0 = default {DEFAULT_PAGE_SIZE}), got {page_size}"
        )
    if page_size == 0:
        return DEFAULT_PAGE_SIZE
    return min(page_size, MAX_PAGE_SIZE)


def _scope_hash(scope: str) -> str:
    return hashlib.blake2b(scope.encode("utf-8"), digest_size=6).hexdigest()


def encode_token(kind: str, scope: str, key: list[object]) -> str:
    raw = json.dumps([kind, _scope_hash(scope), *key], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_token(
    token: str, kind: str, scope: str, shape: tuple[type[float] | type[int] | type[str], ...]
) -> list[object]:
    """The sort key stored in ``token``; ValueError if it is not a token of this listing.

    ``shape`` gives the type of each part of the key (``float`` also accepts an int).
    """
    try:
        padded = token + "=" * (-len(token) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii"))
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise ValueError(
            f"invalid page token {token[:40]!r}: not a token this server issued"
        ) from exc
    if not isinstance(value, list) or len(value) < 2 or value[0] != kind:
        raise ValueError(f"invalid page token {token[:40]!r}: not a token of a {kind} listing")
    if value[1] != _scope_hash(scope):
        raise ValueError(
            f"invalid page token {token[:40]!r}: it belongs to another {kind} listing "
            "(page tokens are valid only with the request that returned them)"
        )
    key = value[2:]
    if len(key) != len(shape) or not all(map(_fits, key, shape)):
        raise ValueError(f"invalid page token {token[:40]!r}: malformed position")
    return key


def _fits(part: object, expected: type[float] | type[int] | type[str]) -> bool:
    if isinstance(part, bool):
        return False
    if expected is float:
        return isinstance(part, int | float)
    return isinstance(part, expected)
