"""A contextd server started with ``--auth api-key`` and keys for two users, for the
tests of how each client sends its credentials."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.auth import create_key
from tests.support.server import ServerProcess, start_server

#: Looks like a key (the id prefix and all) but was never issued.
UNKNOWN_KEY = "ctxd_000000000000_" + "x" * 43


@dataclass(frozen=True)
class KeyedServer:
    proc: ServerProcess
    alice: str  # a key of user alice
    bob: str  # a key of user bob

    @property
    def address(self) -> str:
        return self.proc.address


@contextmanager
def keyed_server(data_dir: Path, *args: str) -> Iterator[KeyedServer]:
    """``contextd serve --auth api-key ARGS`` with keys made before it starts; it must
    stop cleanly."""
    alice, bob = create_key(data_dir, "alice"), create_key(data_dir, "bob")
    proc = start_server(data_dir, "--auth", "api-key", *args)
    try:
        yield KeyedServer(proc, alice, bob)
    finally:
        assert proc.stop() == 0
