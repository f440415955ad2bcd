"""What a server does not use, it does not load: the SDKs of the model providers, of MCP,
of PostgreSQL and of JSON Web Tokens (tens of MB resident each, in every process of a
server) are imported when the settings ask for them, not with the code that serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LATE = ("openai", "anthropic", "mcp", "asyncpg", "jwt")


def loaded_after(code: str) -> set[str]:
    """The packages of LATE loaded once ``code`` ran in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)} & set(LATE)


def test_the_serving_code_loads_none_of_them() -> None:
    assert loaded_after("from contextd.root import server, workers") == set()


JWT = 'auth="jwt", jwt_jwks="https://issuer.example/jwks", jwt_issuer="i", jwt_audience="a"'


@pytest.mark.parametrize(
    ("settings", "loaded"),
    [
        ("", set()),
        ('provider="openai"', {"openai"}),
        ('provider="anthropic"', {"anthropic"}),
        ('embedding_provider="openai"', {"openai"}),
        ("mcp_port=0", {"mcp"}),
        (JWT, {"jwt"}),
    ],
)
def test_what_the_settings_use_is_loaded_before_the_workers_fork(
    settings: str, loaded: set[str], tmp_path: Path
) -> None:
    """The parent of --workers loads what its workers will use, once, so that they
    share its pages; and nothing else."""
    code = (
        "import asyncio\n"
        "from pathlib import Path\n"
        "from contextd.config import Settings\n"
        "from contextd.root.prepare import prepare\n"
        "from contextd.root.workers import prepare_once\n"
        f"settings = Settings(port=0, data_dir=Path({str(tmp_path)!r}), {settings})\n"
        "prepare(settings)\n"
        "asyncio.run(prepare_once(settings))\n"
    )
    assert loaded_after(code) == loaded
