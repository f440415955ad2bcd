"""The sync Python client is generated from the asyncio one (scripts/gen_sync_client.py):
the checked-in module is what the script writes, it has every method of the async client
with the same arguments, and an edit of the async client that leaves a replacement of the
script without its place stops the generation."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from types import ModuleType

import pytest
from contextd_client import AsyncContextClient, ContextClient

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "gen_sync_client.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sync_client", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sync_client_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _methods(cls: type) -> dict[str, list[str]]:
    """Public methods and the names and kinds of their parameters."""
    return {
        name: [f"{p.kind.name} {p.name}" for p in inspect.signature(member).parameters.values()]
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_both_clients_have_the_same_methods_and_arguments() -> None:
    sync = _methods(ContextClient)
    assert len(sync) > 20
    assert sync == _methods(AsyncContextClient)
    assert inspect.signature(ContextClient.__init__).parameters.keys() == (
        inspect.signature(AsyncContextClient.__init__).parameters.keys()
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("sync=False", "sync=bool(0)"), "no 'sync=False' to replace"),
        (
            ('"""End the session (see :meth:`ContextClient.end_session`)."""', "# No docstring"),
            "no docstring of ContextClient.end_session to replace",
        ),
        (("def _start_chat(", "def _open_chat("), "no method ContextClient._start_chat"),
    ],
)
def test_a_replacement_without_its_place_stops_the_generation(
    generator: ModuleType, edit: tuple[str, str], message: str
) -> None:
    source = generator.SOURCE.read_text()
    assert edit[0] in source
    with pytest.raises(generator.GenerationError, match=message):
        generator.generate(source.replace(*edit))
