"""contextd serving a model API on its web port for a module's tests: started with the
given flags, stopped cleanly at the end, and no ERROR logged meanwhile."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.support.server import ServerProcess, start_server


@contextmanager
def model_server(
    data_dir: Path, args: tuple[str, ...], env: Mapping[str, str]
) -> Iterator[ServerProcess]:
    proc = start_server(data_dir, *args, env=dict(env))
    try:
        yield proc
    finally:
        assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]
