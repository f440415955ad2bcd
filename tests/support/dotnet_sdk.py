"""Running the .NET SDK from the tests: `dotnet` commands in their own process group (so a
timeout or a failure ends every process they started, the contextd servers of the C# tests
included), and the results of `dotnet test` read from its TRX report."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOTNET_DIR = ROOT / "clients" / "dotnet"
SOLUTION = DOTNET_DIR / "Contextd.sln"
LIBRARY_PROJECT = DOTNET_DIR / "src" / "Contextd.Client" / "Contextd.Client.csproj"
TEST_PROJECT = DOTNET_DIR / "tests" / "Contextd.Client.Tests" / "Contextd.Client.Tests.csproj"
# A configuration of its own, so that a developer's Debug build in the same folders is
# neither used nor overwritten.
CONFIGURATION = "Release"

_TRX = "{http://microsoft.com/schemas/VisualStudio/TeamTest/2010}"


def dotnet() -> str:
    """The `dotnet` on PATH; the test skips, saying why, where there is none."""
    found = shutil.which("dotnet")
    if found is None:
        pytest.skip(
            "the .NET SDK (dotnet) is not on PATH: the C# and VB builds, their tests against "
            "a live contextd and the package are not run; tests/clients/test_dotnet.py still "
            "checks the client's code against the protos"
        )
    return found


@dataclass
class Run:
    command: list[str]
    returncode: int
    output: str

    def explain(self) -> str:
        return f"$ {' '.join(self.command)}\n(exit {self.returncode})\n{self.output}"


def run(
    args: list[str],
    *,
    cwd: Path = DOTNET_DIR,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> Run:
    """Runs `dotnet ARGS`, output and errors together; on a timeout its whole process group
    is killed and the test fails with what it printed so far."""
    command = [dotnet(), *args]
    environment = {
        **os.environ,
        "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
        "DOTNET_NOLOGO": "1",
        "DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1",
        **(env or {}),
    }
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        pytest.fail(f"timed out after {timeout:.0f} s: {' '.join(command)}\n{output}")
    finally:
        # The build server and test hosts may outlive a finished command; nothing of the
        # group may outlive the test.
        _kill_group(process)
    return Run(command, process.returncode, output)


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class TestOutcome:
    name: str
    outcome: str
    message: str = ""


@dataclass
class TestReport:
    counters: dict[str, int]
    results: list[TestOutcome] = field(default_factory=list)

    def failures(self) -> str:
        return "\n\n".join(
            f"{r.name}: {r.outcome}\n{r.message}" for r in self.results if r.outcome != "Passed"
        )


def read_trx(path: Path) -> TestReport:
    root = ET.parse(path).getroot()
    counters_element = root.find(f"{_TRX}ResultSummary/{_TRX}Counters")
    assert counters_element is not None, f"{path} has no counters"
    counters = {key: int(value) for key, value in counters_element.attrib.items()}
    results = []
    for result in root.iter(f"{_TRX}UnitTestResult"):
        message = result.find(f"{_TRX}Output/{_TRX}ErrorInfo/{_TRX}Message")
        results.append(
            TestOutcome(
                result.attrib["testName"],
                result.attrib["outcome"],
                message.text or "" if message is not None else "",
            )
        )
    return TestReport(counters, results)
