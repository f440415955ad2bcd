"""Call metadata <-> HTTP headers, the same way for every protocol of the gateway."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable

import grpc.aio
from multidict import CIMultiDictProxy

from contextd.core.errors import shown

_KEY = re.compile(r"[0-9a-z_.-]+")
# Request headers that belong to HTTP, the browser or the web protocols themselves, not
# to the call's metadata.
_NOT_METADATA = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "cookie",
        "host",
        "keep-alive",
        "origin",
        "pragma",
        "referer",
        "te",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-grpc-web",
        "x-user-agent",
    }
)
_NOT_METADATA_PREFIXES = ("grpc-", "connect-", "sec-", "access-control-", "proxy-")


def from_headers(headers: CIMultiDictProxy[str]) -> grpc.aio.Metadata:
    """The call's metadata: every request header not about HTTP or the protocol;
    ``-bin`` values are base64 on the wire and bytes to grpc (raises ValueError)."""
    metadata = grpc.aio.Metadata()
    for name, value in headers.items():
        key = name.lower()
        if (
            key in _NOT_METADATA
            or key.startswith(_NOT_METADATA_PREFIXES)
            or not _KEY.fullmatch(key)
        ):
            continue
        if key.endswith("-bin"):
            try:
                metadata.add(key, base64.b64decode(value + "=" * (-len(value) % 4), validate=True))
            except binascii.Error:
                raise ValueError(f"header {shown(key)} is not base64") from None
        else:
            metadata.add(key, value)
    return metadata


def header_pairs(
    metadata: Iterable[tuple[str, str | bytes]], prefix: str = ""
) -> list[tuple[str, str]]:
    """Metadata as header lines; binary values base64-encoded."""
    return [(prefix + key, header_value(value)) for key, value in metadata]


def header_value(value: str | bytes) -> str:
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
