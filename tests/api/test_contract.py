"""The contract: buf lint clean and generated code fresh."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def test_generated_code_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/gen_protos.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_buf_lint_standard_rules() -> None:
    buf = shutil.which("buf") or str(Path(sys.executable).parent / "buf")
    result = subprocess.run([buf, "lint"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
