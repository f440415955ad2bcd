"""One session's event log file written by several processes at once (the workers of one
server): while writes fail part-way for want of space, and while a writer dies in the
middle of a line, every line stays whole and every acknowledged line is kept, in each
writer's order; a failed append leaves nothing behind, and no reader sees its lines.

The faults are injected into each child's ``os.write``: a failing write puts part of its
line in the file, then waits a little (another writer's append has time to land, as
one would under load) before the disk is full; a dying writer leaves half a line and
exits in the middle of its write, as a SIGKILL can."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.files import FileLog

CHILD = r"""
import asyncio, errno, os, random, sys, time
from pathlib import Path
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.files import FileLog

history, sid, writer, appends, seed, dies = sys.argv[1:7]
rng = random.Random(int(seed))
real_write = os.write
fault = {"kind": "", "calls": 0}

def write(fd, data):
    if not fault["kind"]:
        return real_write(fd, data)
    fault["calls"] += 1
    if fault["calls"] == 1:  # part of the line reaches the file
        return real_write(fd, bytes(data[: max(1, len(data) // 2)]))
    time.sleep(0.003)  # the window another process's append could land in
    if fault["kind"] == "dies":
        os._exit(3)
    raise OSError(errno.ENOSPC, "No space left on device")

os.write = write

async def main() -> None:
    log = EventStore(FileLog(Path(history)))
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(int(appends)):
        last = n == int(appends) - 1
        fault["kind"] = "dies" if last and dies == "1" else "full" if rng.random() < 0.25 else ""
        fault["calls"] = 0
        content = "上下文 " * rng.choice((0, 10, 2000))
        try:
            await log.append(sid, "observation", turn=1, content=content,
                             meta={"writer": writer, "n": n})
        except OSError as error:
            assert error.errno == errno.ENOSPC
            print("full", n, flush=True)
        else:
            print("ok", n, flush=True)

asyncio.run(main())
"""


@dataclass
class Writer:
    name: str
    process: asyncio.subprocess.Process
    acked: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


async def start(history: Path, sid: str, name: str, appends: int, seed: int, dies: bool) -> Writer:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(history),
        sid,
        name,
        str(appends),
        str(seed),
        "1" if dies else "0",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    ready = await asyncio.wait_for(process.stdout.readline(), 60)
    assert ready == b"ready\n", ready + await process.stderr.read()
    return Writer(name, process)


async def finish(writer: Writer) -> int:
    out, err = await asyncio.wait_for(writer.process.communicate(), 60)
    for line in out.decode().splitlines():
        outcome, n = line.split()
        (writer.acked if outcome == "ok" else writer.failed).append(int(n))
    assert writer.process.returncode is not None
    if writer.process.returncode not in (0, 3):
        raise AssertionError(err.decode())
    return writer.process.returncode


def whole_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


async def test_writers_in_several_processes_keep_every_acknowledged_line(
    tmp_path: Path,
) -> None:
    history, sid = tmp_path / "history", uuid.uuid4().hex
    plan = [("a", 300, False), ("b", 300, False), ("c", 60, True)]
    writers = [
        await start(history, sid, name, appends, seed, dies)
        for seed, (name, appends, dies) in enumerate(plan)
    ]
    for writer in writers:  # all at once, once every one has started
        assert writer.process.stdin is not None
        writer.process.stdin.write(b"go\n")
        await writer.process.stdin.drain()
    codes = [await finish(writer) for writer in writers]
    assert codes == [0, 0, 3]  # the last one died in the middle of a line

    # This process writes last: a torn line the dying writer may have left last is cut.
    files = FileLog(history)
    log = EventStore(files)
    await log.append(sid, "session_end")
    events = whole_lines(files.path(sid))
    assert events[-1]["type"] == "session_end"
    for writer in writers:
        written = [e["meta"]["n"] for e in events[:-1] if e["meta"]["writer"] == writer.name]
        assert written == writer.acked, writer.name
        assert writer.failed, f"{writer.name}: no write failed, the test proves nothing"
    assert len(events) == 1 + sum(len(writer.acked) for writer in writers)


# The child: a turn's final and turn_end lines in one append, whose write puts the first
# line, whole, in the file and fails for want of space half a second later.
UNDONE = r"""
import asyncio, errno, os, sys, time
from pathlib import Path
from contextd.store.event_log.events import NewEvent
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.files import FileLog

real_write = os.write
calls = []

def write(fd, data):
    calls.append(len(data))
    if len(calls) == 1:
        written = real_write(fd, bytes(data[: bytes(data).index(b"\n") + 1]))
        print("one line written", flush=True)
        return written
    time.sleep(0.5)
    raise OSError(errno.ENOSPC, "No space left on device")

async def main() -> None:
    log = EventStore(FileLog(Path(sys.argv[1])))
    os.write = write
    lines = [NewEvent("final", 1, 0, "the answer"), NewEvent("turn_end", 1)]
    try:
        await log.append_many(sys.argv[2], lines)
    except OSError:
        print("undone", flush=True)

asyncio.run(main())
"""


async def last_type(log: EventStore, sid: str) -> list[str]:
    last = await log.last(sid)
    return [] if last is None else [last["type"]]


async def read_types(log: EventStore, sid: str) -> list[str]:
    return [event["type"] async for event in log.read(sid)]


@pytest.mark.parametrize("reader", [last_type, read_types])
async def test_a_reader_never_sees_a_line_of_an_append_that_is_undone(
    tmp_path: Path, reader: Callable[[EventStore, str], Awaitable[list[str]]]
) -> None:
    """Another process's append of two lines has written the first, whole, and will fail:
    the last line, or an export, read meanwhile is what was there before it."""
    files, sid = FileLog(tmp_path), uuid.uuid4().hex
    log = EventStore(files)
    await log.append(sid, "session_start")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        UNDONE,
        str(tmp_path),
        sid,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = child.stdout, child.stderr
    assert out is not None and err is not None
    try:
        written = await asyncio.wait_for(out.readline(), 60)
        assert written == b"one line written\n", written + await err.read()
        assert files.path(sid).read_bytes().endswith(b'"final","content":"the answer"}\n')
        assert await reader(log, sid) == ["session_start"]
        assert await asyncio.wait_for(out.readline(), 60) == b"undone\n"
    finally:
        await child.communicate()
    assert child.returncode == 0
    assert [e["type"] for e in whole_lines(files.path(sid))] == ["session_start"]
