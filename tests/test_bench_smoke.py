"""The benchmarks in bench/ still run: each ``--quick`` run exits 0 and prints its RESULT line.

Only that they run is checked, never PASS or FAIL: timing has no place in unit tests.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

BENCH = ROOT / "bench"
SCRIPTS = (
    "build_vs_echo",
    "trim_vs_langchain",
    "memory_search",
    "memory_hybrid",
    "store_writes",
    "session_build",
    "stream_vs_grpc",
    "first_delta",
    "auth_cost",
    "metrics_cost",
    "observability_cost",
    "pg_driver",
    "pg_vs_sqlite",
    "prompt_cache",
    "memory_recall",
    "memory_thresholds",
    "embedding_start",
    "openai_first_token",
    "anthropic_first_token",
    "mcp_tool_call",
    "context_editing",
    "worker_memory",
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_quick_run_prints_result(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pattern = rf"^RESULT {name} ratio=[0-9.]+ target=([0-9.]+|none) (PASS|FAIL)$"
    assert re.search(pattern, done.stdout, re.MULTILINE), done.stdout[-2000:]
