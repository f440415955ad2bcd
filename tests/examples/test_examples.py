"""The programs of examples/ run against a live server whose echo provider streams slowly
(`--echo-delay-ms`), and print what they say they print. The Node ones need `make test`
to have installed and built them (the Node client, examples/node's link to it, and the
task pane's TypeScript); without node they are skipped."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.foreground import as_foreground_job
from tests.support.paths import ROOT
from tests.support.server import ServerProcess, start_server

EXAMPLES = ROOT / "examples"
PYTHON = EXAMPLES / "python"
# The echo answer quotes the message: with this one, a few seconds of deltas.
LONG = " ".join(f"w{k}" for k in range(300))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("examples"), "--echo-delay-ms", "30", "--web-port", "0"
    )
    yield proc
    assert proc.stop() == 0


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_chat_sync_prints_the_turn(server: ServerProcess) -> None:
    result = run(sys.executable, PYTHON / "chat_sync.py", server.address, "Hi there")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[session ") and lines[0].endswith(", turn 1]")
    assert lines[1].startswith("echo: I received 2 messages") and lines[1].endswith("“Hi there”")
    assert lines[2].startswith("[ok: ")


@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["default", "ignored"])
def test_chat_sync_ctrl_c_cancels_the_turn(
    server: ServerProcess, inherited: signal.Handlers
) -> None:
    # "ignored": as under a shell without job control (`make test &`), whose background
    # commands start with SIGINT ignored; the child takes a foreground job's dispositions.
    command = as_foreground_job(
        [sys.executable, str(PYTHON / "chat_sync.py"), server.address, LONG]
    )
    previous = signal.signal(signal.SIGINT, inherited)
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert process.stdout is not None
    assert process.stdout.readline().startswith("[session ")
    time.sleep(0.5)  # a few deltas in, far from the end
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 130
    printed = process.stdout.read()
    assert printed.startswith("echo: I received") and printed.endswith("\n[cancelled]\n")


def test_chat_async_prints_the_turn(server: ServerProcess) -> None:
    result = run(sys.executable, PYTHON / "chat_async.py", server.address, "Hi there")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[session ")
    assert lines[1].startswith("echo: I received") and lines[1].endswith("“Hi there”")
    assert lines[2].startswith("[ok: ")
    assert lines[3].startswith("[the event loop ticked ")


def test_build_openai_prints_a_request_body(server: ServerProcess) -> None:
    result = run(sys.executable, PYTHON / "build_openai.py", server.address)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["model"] == "gpt-4o-mini"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert body["messages"][-1] == {"role": "user", "content": "And of Italy?"}
    assert "history kept: 2 of 4" in result.stderr


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed")
    return found


def built(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: run `make test` first"


def test_node_example_prints_the_turn(server: ServerProcess) -> None:
    runner = node()
    built(ROOT / "clients" / "node" / "dist" / "src" / "index.js")
    built(EXAMPLES / "node" / "node_modules" / "@contextd" / "client")
    result = run(runner, EXAMPLES / "node" / "chat.mjs", server.address, "Hi there")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[session ")
    assert lines[1].startswith("echo: I received") and lines[1].endswith("“Hi there”")
    assert lines[2] == "[OK]"


def test_the_task_pane_streams_a_turn_over_connect(server: ServerProcess) -> None:
    """Office.js cannot run here: the pane's Connect code runs in Node instead."""
    runner = node()
    module = EXAMPLES / "office-taskpane" / "dist" / "stream_chat.js"
    built(module)
    [web] = [str(e["address"]) for e in server.logs("grpc-web listening")]
    script = (
        f"import {{ streamChat }} from {json.dumps(module.as_uri())};\n"
        f"const request = {{ session: {{ userId: 'pane' }}, userMessage: 'Hi there' }};\n"
        f"for await (const event of streamChat('http://{web}', request))\n"
        "  console.log(JSON.stringify(event));\n"
    )
    result = run(runner, "--input-type=module", "-e", script)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert next(iter(events[0])) == "turnStarted"
    done = events[-1]["turnCompleted"]
    assert done["status"] == "TURN_STATUS_OK"
    assert "".join(e["textDelta"]["text"] for e in events if "textDelta" in e) == done["finalText"]


def test_the_readme_links_to_files_that_exist() -> None:
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)", text)
    assert targets
    assert [t for t in targets if not (EXAMPLES / t).exists()] == []
