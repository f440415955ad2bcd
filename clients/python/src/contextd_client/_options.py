"""What both clients take alike: the default target and the caller's own call metadata."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from ._credentials import CallMetadata

DEFAULT_TARGET = "127.0.0.1:50151"

MetadataValue: TypeAlias = str | bytes
Metadata: TypeAlias = Mapping[str, MetadataValue] | Sequence[tuple[str, MetadataValue]]


def call_metadata(metadata: Metadata | None) -> CallMetadata | None:
    """Metadata sent with every call, as the tuple of pairs grpc expects."""
    if metadata is None:
        return None
    pairs = metadata.items() if isinstance(metadata, Mapping) else metadata
    return tuple((key, value) for key, value in pairs)
