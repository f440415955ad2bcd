"""Settings for a server a test runs in its own process."""

from __future__ import annotations

from typing import Any

from contextd.config import Settings


def terms_only(**fields: Any) -> Settings:
    """``Settings(**fields)`` with memory search by terms alone unless ``fields`` say
    otherwise: the local model is the server's default, and its load (seconds of CPU,
    about 100 MB) belongs only to the tests about search by meaning."""
    return Settings(**{"embedding_provider": "none", **fields})
