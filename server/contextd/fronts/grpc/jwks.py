"""The token signing keys of an identity provider: a JWKS read from a file or a URL, cached.

The set is read when first needed, again (in the background) once it is older than
``max_age``, and again when a token names a key id the set does not have (the
provider rotated its keys). No two reads start less than ``min_interval`` apart,
whatever the tokens say, so tokens with made-up key ids cannot make the server fetch
in a loop. A read that fails keeps the keys of the last good one: the provider being
down for a while does not lock out tokens signed with keys already known.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from contextd.core.network import is_loopback

log = logging.getLogger("contextd.jwt")

# Asymmetric only: an HMAC algorithm would let the public key serve as a secret.
ALLOWED_ALGORITHMS = ("RS256", "ES256")
# A provider's key set is a few kilobytes; anything far bigger is not one.
MAX_JWKS_BYTES = 1024 * 1024


class JwksSource(Protocol):
    """Where the key set comes from; ``read`` raises on any failure."""

    def describe(self) -> str: ...

    async def read(self) -> bytes: ...


class JwksFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> str:
        return str(self.path)

    async def read(self) -> bytes:
        # In a thread: a slow disk or network file system must not stall every call.
        return await asyncio.to_thread(self.path.read_bytes)


class JwksUrl:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout

    def describe(self) -> str:
        return self.url

    async def read(self) -> bytes:
        # A session per read: reads are minutes apart, and nothing is left to close.
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(self.url, headers={"Accept": "application/json"}) as reply,
        ):
            if reply.status != 200:
                raise ValueError(f"HTTP status {reply.status}")
            body = bytearray()
            async for chunk in reply.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
            return bytes(body)


def jwks_source(location: str, timeout: float = 10.0) -> JwksSource:
    """A file path or an https URL; plain http only to a loopback address, where
    nobody on the network can swap the keys."""
    scheme = urlsplit(location).scheme.lower()
    if scheme == "https":
        return JwksUrl(location, timeout)
    if scheme == "http":
        if not is_loopback(urlsplit(location).hostname or ""):
            raise ValueError(f"--jwt-jwks {location!r}: use https (http only for loopback)")
        return JwksUrl(location, timeout)
    if "://" in location:
        raise ValueError(f"--jwt-jwks {location!r}: a file path or an https URL")
    path = Path(location).expanduser()
    if not path.is_file():
        raise ValueError(f"--jwt-jwks {location!r}: no such file")
    return JwksFile(path)


def parse_jwks(data: bytes) -> dict[str, PyJWK]:
    """The signing keys of a JWKS document by key id; keys for other uses or other
    algorithms are left out. Raises ValueError when none is usable."""
    document = json.loads(data)
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("not a JWKS document (no keys list)")
    keys: dict[str, PyJWK] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid:
            continue
        try:
            key = PyJWK(entry)
        except (PyJWTError, ValueError, TypeError, KeyError):
            continue  # one unusable key does not spoil the others
        if key.algorithm_name in ALLOWED_ALGORITHMS:
            keys[kid] = key
    if not keys:
        raise ValueError(f"no {' or '.join(ALLOWED_ALGORITHMS)} signing key with a kid")
    return keys


class JwksCache:
    def __init__(
        self,
        source: JwksSource,
        *,
        max_age: float = 600.0,
        min_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self.min_interval = min_interval
        self._clock = clock
        self._keys: Mapping[str, PyJWK] = {}
        self._read_at: float | None = None  # last good read
        self._tried_at: float | None = None  # last read, good or not
        self._reading: asyncio.Task[None] | None = None

    async def key(self, kid: str) -> PyJWK | None:
        """The key named ``kid``, reading the set again when it is old or lacks it."""
        if self._read_at is None:
            await self._refresh()
        elif self._clock() - self._read_at >= self.max_age:
            # In the background: the cached keys serve the calls meanwhile.
            self._start_read()
        key = self._keys.get(kid)
        if key is None:
            await self._refresh()
            key = self._keys.get(kid)
        return key

    async def wait_for_read(self) -> None:
        """Returns once no read is running."""
        if self._reading is not None:
            await asyncio.shield(self._reading)

    def _may_read(self) -> bool:
        return self._tried_at is None or self._clock() - self._tried_at >= self.min_interval

    def _start_read(self) -> None:
        # One read at a time, and none sooner than min_interval after the last.
        if self._reading is None and self._may_read():
            self._tried_at = self._clock()
            self._reading = asyncio.create_task(self._read())

    async def _refresh(self) -> None:
        self._start_read()
        # Shielded: a caller that goes away must not cancel the read others wait for.
        await self.wait_for_read()

    async def _read(self) -> None:
        try:
            keys = parse_jwks(await self.source.read())
        except (OSError, ValueError, aiohttp.ClientError, TimeoutError) as error:
            log.warning(
                "jwks read failed",
                extra={"source": self.source.describe(), "error": str(error) or repr(error)},
            )
            return
        finally:
            self._reading = None
        self._keys = keys
        self._read_at = self._tried_at
        log.info("jwks read", extra={"source": self.source.describe(), "kids": sorted(keys)})
