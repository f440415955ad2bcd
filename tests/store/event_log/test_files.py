"""The JSONL event log (docs/chat.md) on real files: format, ordering, torn lines, crashes,
and another tenant's logs in a directory of their own."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from contextd.store.event_log.events import EventStore, event_tokens
from contextd.store.event_log.files import FileLog

A, B = "acme", "globex"

# A documented example of a whole session, line by line.
EVENT_LOG_EXAMPLE = r"""
{"ts":"2024-05-10T12:00:00Z","session_id":"sess_x","type":"session_start","meta":{"mode":"interactive","model":"deepseek-chat","tokenizer":"cl100k_base"}}
{"ts":"2024-05-10T12:00:05Z","session_id":"sess_x","turn":1,"type":"turn_start","content":"帮我读 README","meta":{"tokens":{"prompt":12}}}
{"ts":"2024-05-10T12:00:06Z","session_id":"sess_x","turn":1,"step":0,"type":"assistant","content":"<thought>需要 read...</thought><action tool=\"read\">...","meta":{"tokens":{"prompt":120,"completion":35,"total":155}}}
{"ts":"2024-05-10T12:00:06Z","session_id":"sess_x","turn":1,"step":0,"type":"action","meta":{"tool":"read","input":"/repo/README.md"}}
{"ts":"2024-05-10T12:00:06Z","session_id":"sess_x","turn":1,"step":0,"type":"observation","meta":{"tool":"read"},"content":"(文件片段)"}
{"ts":"2024-05-10T12:00:08Z","session_id":"sess_x","turn":1,"step":1,"type":"final","content":"README 摘要...","meta":{"tokens":{"completion":28}}}
{"ts":"2024-05-10T12:00:08Z","session_id":"sess_x","turn":1,"type":"turn_end","meta":{"status":"ok","stepCount":2,"durationMs":3000,"tokens":{"prompt":132,"completion":63,"total":195}}}
{"ts":"2024-05-10T12:05:00Z","session_id":"sess_x","type":"session_end"}
"""  # noqa: E501


KEY_ORDER = ["ts", "session_id", "turn", "step", "type", "content", "role", "meta"]


def new_id() -> str:
    return uuid.uuid4().hex


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


async def read_all(log: EventStore, session_id: str, after_line: int = 0) -> list[dict[str, Any]]:
    return [event async for event in log.read(session_id, after_line=after_line)]


@pytest.fixture
def files(tmp_path: Path) -> FileLog:
    return FileLog(tmp_path / "history")


@pytest.fixture
async def log(files: FileLog) -> AsyncIterator[EventStore]:
    event_log = EventStore(files)
    yield event_log
    await event_log.aclose()


async def test_the_documented_example_through_the_api(log: EventStore, files: FileLog) -> None:
    """The example sequence written through append has the example's keys, key order and
    omissions line by line, and the same values but for ts and session_id."""
    sid = new_id()
    t0 = 1715342400.0  # 2024-05-10T12:00:00Z
    await log.append(
        sid,
        "session_start",
        meta={"mode": "interactive", "model": "deepseek-chat", "tokenizer": "cl100k_base"},
        ts=t0,
    )
    await log.append(
        sid,
        "turn_start",
        turn=1,
        content="帮我读 README",
        meta={"tokens": event_tokens(12, None)},
        ts=t0 + 5,
    )
    await log.append(
        sid,
        "assistant",
        turn=1,
        step=0,
        content='<thought>需要 read...</thought><action tool="read">...',
        meta={"tokens": event_tokens(120, 35)},
        ts=t0 + 6,
    )
    await log.append(
        sid, "action", turn=1, step=0, meta={"tool": "read", "input": "/repo/README.md"}
    )
    await log.append(
        sid, "observation", turn=1, step=0, content="(文件片段)", meta={"tool": "read"}
    )
    await log.append(
        sid,
        "final",
        turn=1,
        step=1,
        content="README 摘要...",
        meta={"tokens": event_tokens(None, 28)},
    )
    turn_meta = {"status": "ok", "stepCount": 2, "durationMs": 3000}
    await log.append(sid, "turn_end", turn=1, meta={**turn_meta, "tokens": event_tokens(132, 63)})
    last = await log.append(sid, "session_end", ts=t0 + 300.5)

    ours = lines_of(files.path(sid))
    example = [json.loads(line) for line in EVENT_LOG_EXAMPLE.strip().splitlines()]
    assert len(ours) == len(example)
    for number, (mine, theirs) in enumerate(zip(ours, example, strict=True), start=1):
        canonical = [k for k in KEY_ORDER if k in theirs]
        assert list(mine) == canonical, f"line {number}"
        if theirs["type"] != "observation":
            # The example's observation line alone puts meta before content; every other
            # line follows the field list's order, which the log always writes.
            assert list(theirs) == canonical, f"line {number}"
        assert {k: v for k, v in mine.items() if k not in ("ts", "session_id")} == {
            k: v for k, v in theirs.items() if k not in ("ts", "session_id")
        }, f"line {number}"
        assert mine["session_id"] == sid
    assert ours[0]["ts"] == "2024-05-10T12:00:00.000Z"
    assert ours[1]["ts"] == "2024-05-10T12:00:05.000Z"
    assert ours[-1]["ts"] == last["ts"] == "2024-05-10T12:05:00.500Z"
    assert last == ours[-1]
    # Compact: no space after separators outside the strings themselves.
    raw = files.path(sid).read_text(encoding="utf-8").splitlines()
    assert (
        raw[-1] == f'{{"ts":"2024-05-10T12:05:00.500Z","session_id":"{sid}","type":"session_end"}}'
    )
    assert await read_all(log, sid) == ours


async def test_fifty_concurrent_appenders_keep_call_order(log: EventStore, files: FileLog) -> None:
    """50 tasks append to one session at once: every line is whole, and lines are in the
    order append was called (which also keeps each task's own order)."""
    sid = new_id()
    counter = itertools.count()

    async def appender(k: int) -> None:
        for i in range(40):
            seq = next(counter)
            await log.append(sid, "observation", turn=1, step=i, content=f"{seq}", meta={"k": k})
            if random.random() < 0.3:
                await asyncio.sleep(0)

    await asyncio.gather(*(appender(k) for k in range(50)))
    events = lines_of(files.path(sid))
    assert [int(e["content"]) for e in events] == list(range(50 * 40))
    for k in range(50):
        assert [e["step"] for e in events if e["meta"]["k"] == k] == list(range(40))
    assert await read_all(log, sid) == events


async def test_twenty_sessions_at_once_stay_apart(log: EventStore, files: FileLog) -> None:
    sids = [new_id() for _ in range(20)]

    async def appender(sid: str, k: int) -> None:
        for i in range(30):
            await log.append(sid, "assistant", turn=1 + i // 10, step=i % 10, content=f"{k}:{i}")

    await asyncio.gather(*(appender(sid, k) for sid in sids for k in range(3)))
    for sid in sids:
        events = await read_all(log, sid)
        assert len(events) == 90
        assert {e["session_id"] for e in events} == {sid}
        for k in range(3):
            mine = [e["content"] for e in events if e["content"].startswith(f"{k}:")]
            assert mine == [f"{k}:{i}" for i in range(30)]
    assert sorted(p.name for p in files.history_dir.iterdir()) == sorted(f"{s}.jsonl" for s in sids)


@pytest.mark.parametrize(
    "bad",
    [
        "sess_x",
        "",
        "0" * 31,
        "0" * 33,
        "A" * 32,
        "0" * 32 + "\n",
        "../" + "0" * 29,
        "../../../../etc/passwd",
        "0" * 16 + "/" + "0" * 15,
        "g" * 32,
    ],
)
async def test_bad_session_ids_are_refused(log: EventStore, files: FileLog, bad: str) -> None:
    with pytest.raises(ValueError, match="session_id"):
        await log.append(bad, "session_start")
    with pytest.raises(ValueError, match="session_id"):
        await read_all(log, bad)
    with pytest.raises(ValueError, match="session_id"):
        await log.delete(bad)
    assert list(files.history_dir.iterdir()) == []


async def test_bad_fields_are_refused(log: EventStore, files: FileLog) -> None:
    sid = new_id()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "bogus"}, "type"),
        ({"type": ""}, "type"),
        ({"type": "SESSION_START"}, "type"),
        ({"type": "assistant", "role": "tool"}, "role"),
        ({"type": "assistant", "role": "User"}, "role"),
        ({"type": "assistant", "role": ""}, "role"),
        ({"type": "turn_start", "turn": 0}, "turn"),
        ({"type": "turn_start", "turn": True}, "turn"),
        ({"type": "assistant", "turn": 1, "step": -1}, "step"),
        ({"type": "assistant", "content": 3}, "content"),
        ({"type": "assistant", "meta": ["x"]}, "meta"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValueError, match=field):
            await log.append(sid, **kwargs)
    with pytest.raises(ValueError):
        await log.append(sid, "assistant", meta={"tokens": float("nan")})
    with pytest.raises(TypeError):
        await log.append(sid, "assistant", meta={"x": object()})
    assert not files.path(sid).exists()
    for role in ("system", "user", "assistant"):
        event = await log.append(sid, "assistant", turn=1, step=0, role=role, content="")
        assert event["role"] == role and event["content"] == ""
    assert len(lines_of(files.path(sid))) == 3


async def test_torn_last_line_is_skipped_then_cut_by_the_next_write(
    log: EventStore, files: FileLog
) -> None:
    sid = new_id()
    for i in range(3):
        await log.append(sid, "assistant", turn=1, step=i, content=f"s{i}")
    path = files.path(sid)
    whole = path.read_bytes()
    for torn in (b'{"ts":"2024-05-10T12:0', b'{"ts":"x","session_id":"y","type":"final"}'):
        path.write_bytes(whole + torn)  # a crash mid-write; even valid JSON lacks its newline
        assert [e["content"] for e in await read_all(log, sid)] == ["s0", "s1", "s2"]
        assert [e["content"] for e in await read_all(log, sid, after_line=3)] == []
    await log.append(sid, "final", turn=1, step=3, content="s3")
    assert [e["content"] for e in lines_of(path)] == ["s0", "s1", "s2", "s3"]
    # A file that is nothing but a torn line.
    other = new_id()
    files.path(other).write_bytes('{"content":"半'.encode()[:-1])
    assert await read_all(log, other) == []
    await log.append(other, "session_start")
    assert [e["type"] for e in lines_of(files.path(other))] == ["session_start"]


async def test_a_corrupt_middle_line_is_an_error(log: EventStore, files: FileLog) -> None:
    sid = new_id()
    await log.append(sid, "session_start")
    with files.path(sid).open("ab") as file:
        file.write(b"not json\n")
    await log.append(sid, "session_end")
    with pytest.raises(ValueError, match="line 2"):
        await read_all(log, sid)
    assert [e["type"] for e in await read_all(log, sid, after_line=2)] == ["session_end"]


async def test_chinese_stays_readable(log: EventStore, files: FileLog) -> None:
    sid = new_id()
    text = "帮我读 README，总结一下：「上下文」\u2028第二段"
    await log.append(sid, "turn_start", turn=1, content=text, meta={"备注": "中文元数据"})
    raw = files.path(sid).read_bytes()
    assert "帮我读 README，总结一下：「上下文」".encode() in raw
    assert "中文元数据".encode() in raw and "备注".encode() in raw
    assert b"\\u" not in raw.replace(b"\\u2028", b"")  # only the line separator is escaped
    assert raw.count(b"\n") == 1
    [event] = await read_all(log, sid)
    assert event["content"] == text and event["meta"] == {"备注": "中文元数据"}


async def test_read_pages_with_after_line(log: EventStore) -> None:
    sid = new_id()
    for i in range(25):
        await log.append(sid, "observation", turn=1, step=i, content=f"e{i}")
    assert await read_all(log, new_id()) == []  # no file
    pages, after = [], 0
    while True:
        page = []
        async with aclosing(log.read(sid, after_line=after)) as events:
            async for event in events:
                page.append(event["content"])
                if len(page) == 10:
                    break
        if not page:
            break
        pages.append(page)
        after += len(page)
    assert pages == [
        [f"e{i}" for i in range(0, 10)],
        [f"e{i}" for i in range(10, 20)],
        [f"e{i}" for i in range(20, 25)],
    ]
    assert await read_all(log, sid, after_line=25) == []
    assert await read_all(log, sid, after_line=1000) == []
    with pytest.raises(ValueError, match="after_line"):
        await read_all(log, sid, after_line=-1)


async def test_read_is_a_snapshot_and_handles_long_lines(log: EventStore) -> None:
    sid = new_id()
    big = "长" * 300_000  # 900 KB in UTF-8, over the read chunk
    for i in range(3):
        await log.append(sid, "observation", turn=1, step=i, content=f"{i}{big}")
    seen = []
    async for event in log.read(sid):
        seen.append(event["step"])
        await log.append(sid, "observation", turn=1, step=len(seen) + 2, content="later")
    assert seen == [0, 1, 2]  # lines appended during the read are not part of it
    assert len(await read_all(log, sid)) == 6
    assert [e["step"] for e in await read_all(log, sid, after_line=2)] == [2, 3, 4, 5]


async def test_delete_waits_for_earlier_appends(log: EventStore, files: FileLog) -> None:
    sid = new_id()
    assert await log.delete(sid) is False
    appends = [asyncio.create_task(log.append(sid, "assistant", turn=1, step=i)) for i in range(20)]
    await asyncio.sleep(0)
    assert await log.delete(sid) is True
    await asyncio.gather(*appends)
    assert not files.path(sid).exists()
    assert await read_all(log, sid) == []
    await log.append(sid, "session_start")
    assert [e["type"] for e in await read_all(log, sid)] == ["session_start"]


async def test_an_append_cancelled_before_it_runs_writes_nothing(log: EventStore) -> None:
    """An append writes its line before it first suspends: cancelled before it ran, it
    writes nothing; every other line is whole and in call order."""
    sid = new_id()
    tasks = [
        asyncio.create_task(log.append(sid, "assistant", turn=1, step=i, content="x" * 100_000))
        for i in range(30)
    ]
    for task in tasks[::3]:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert sum(isinstance(r, asyncio.CancelledError) for r in results) == 10
    await log.append(sid, "final", turn=1, step=30)
    kept = [i for i in range(30) if i % 3] + [30]
    assert [e["step"] for e in await read_all(log, sid)] == kept


async def test_aclose_refuses_later_writes(tmp_path: Path) -> None:
    files = FileLog(tmp_path)
    log = EventStore(files)
    sids = [new_id() for _ in range(5)]
    tasks = [
        asyncio.create_task(log.append(sid, "observation", turn=1, step=i))
        for i in range(50)
        for sid in sids
    ]
    await asyncio.sleep(0)
    await log.aclose()
    assert all(task.done() and task.exception() is None for task in tasks)
    for sid in sids:
        assert [e["step"] for e in lines_of(files.path(sid))] == list(range(50))
    with pytest.raises(RuntimeError, match="closed"):
        await log.append(sids[0], "session_end")
    with pytest.raises(RuntimeError, match="closed"):
        await log.delete(sids[0])
    await log.aclose()  # twice is fine
    assert len(await read_all(log, sids[0])) == 50  # reading needs no writer


async def test_a_failed_write_fails_its_append_and_the_next_works(tmp_path: Path) -> None:
    """A write that fails (the directory vanished) fails its appends; the next write works."""
    files = FileLog(tmp_path / "history")
    log = EventStore(files)
    sid = new_id()
    await log.append(sid, "session_start")
    files.path(sid).unlink()
    files.history_dir.rmdir()
    with pytest.raises(FileNotFoundError):
        await log.append(sid, "turn_start", turn=1)
    files.history_dir.mkdir()
    await log.append(sid, "session_end")
    assert [e["type"] for e in await read_all(log, sid)] == ["session_end"]
    await log.aclose()


# The child: append events of random sizes to one session forever, printing
# "appended N" (N events acknowledged so far) as each append returns.
CHILD = """
import asyncio, random, sys
from pathlib import Path
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.files import FileLog

async def main() -> None:
    log = EventStore(FileLog(Path(sys.argv[1])))
    sid, start, rng = sys.argv[2], int(sys.argv[3]), random.Random(int(sys.argv[3]))
    n = 0
    while True:
        filler = "上下文 " * rng.choice((0, 1, 10, 1000, 20000))
        await log.append(sid, "observation", turn=1, step=start + n, content=filler)
        n += 1
        print("appended", n, flush=True)

asyncio.run(main())
"""


async def run_and_kill(history: Path, sid: str, start: int, acks_before_kill: int) -> int:
    """Run the child until it acknowledged ``acks_before_kill`` events, SIGKILL it right
    after, and return the last N it printed (including any still in the pipe)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(history),
        sid,
        str(start),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    acked = 0
    try:
        while acked < acks_before_kill:
            line = await asyncio.wait_for(child.stdout.readline(), 30)
            assert line.startswith(b"appended "), line + await child.stderr.read()
            acked = int(line.split()[1])
        await asyncio.sleep(random.uniform(0, 0.005))  # land anywhere in a later write
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = await child.communicate()
    assert child.returncode == -signal.SIGKILL
    # Only whole lines count: the kill may cut a print short.
    for line in rest.split(b"\n")[:-1]:
        acked = max(acked, int(line.removeprefix(b"appended ")))
    return acked


async def test_appended_events_survive_sigkill(tmp_path: Path) -> None:
    log = EventStore(FileLog(tmp_path))
    sid = new_id()
    rng = random.Random(20240510)
    acked_total = 0
    for round_ in range(5):
        start = round_ * 100_000
        acked = await run_and_kill(tmp_path, sid, start, rng.randint(20, 200))
        events = await read_all(log, sid)
        steps = [e["step"] for e in events]
        this_round = [s - start for s in steps if s >= start]
        # Everything acknowledged is there, in order; at most the unacknowledged
        # in-flight event follows it.
        assert this_round[:acked] == list(range(acked)), f"round {round_}"
        assert len(this_round) in (acked, acked + 1), f"round {round_}"
        assert len(steps) - len(this_round) == acked_total  # earlier rounds untouched
        acked_total += len(this_round)
    await log.aclose()


async def test_event_logs_of_other_tenants_live_in_a_tenant_directory(tmp_path: Path) -> None:
    log = EventStore(FileLog(tmp_path / "history"))
    sid = "b" * 32
    await log.append(sid, "session_start")
    await log.append(sid, "session_start", tenant_id=A)
    await log.append(sid, "turn_start", turn=1, tenant_id=A)
    assert (tmp_path / "history" / f"{sid}.jsonl").is_file()  # the default tenant: as before
    assert (tmp_path / "history" / "tenants" / A / f"{sid}.jsonl").is_file()
    assert [e["type"] async for e in log.read(sid)] == ["session_start"]
    assert [e["type"] async for e in log.read(sid, tenant_id=A)] == ["session_start", "turn_start"]
    assert [e async for e in log.read(sid, tenant_id=B)] == []
    assert await log.delete(sid, tenant_id=A)
    assert [e["type"] async for e in log.read(sid)] == ["session_start"]


@pytest.mark.parametrize("tenant", ["..", "../x", "a/b", ".hidden", "", "x" * 129, "a b", "é"])
async def test_event_log_refuses_a_tenant_id_that_is_not_a_plain_name(
    tmp_path: Path, tenant: str
) -> None:
    files = FileLog(tmp_path / "history")
    log = EventStore(files)
    with pytest.raises(ValueError, match="tenant_id"):
        await log.append("c" * 32, "session_start", tenant_id=tenant)
    with pytest.raises(ValueError, match="tenant_id"):
        files.path("c" * 32, tenant)
    assert _names_under(tmp_path) == ["history"]


def _names_under(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*"))


async def test_tenants_differing_in_case_never_share_a_directory(tmp_path: Path) -> None:
    """Where the filesystem ignores case, "Acme" and "acme" would be one directory."""
    history = tmp_path / "history"
    log = EventStore(FileLog(history))
    try:
        sids = {tenant: new_id() for tenant in ["acme", "Acme", "ACME", "aCme", "a_c.m-e", "Z"]}
        for tenant, sid in sids.items():
            await log.append(sid, "session_start", tenant_id=tenant)
        names = [p.name for p in (history / "tenants").iterdir()]
        assert len({name.lower() for name in names}) == len(names) == len(sids)
        for tenant, sid in sids.items():
            assert [e["session_id"] async for e in log.read(sid, tenant_id=tenant)] == [sid]
            for other in sids:
                if other != tenant:
                    assert [e async for e in log.read(sid, tenant_id=other)] == []
    finally:
        await log.aclose()


async def test_a_tenant_directory_named_before_is_moved_at_start(tmp_path: Path) -> None:
    history = tmp_path / "history"
    sid = new_id()
    legacy = history / "tenants" / "Acme"  # the id itself, as directories were named
    legacy.mkdir(parents=True)
    (legacy / f"{sid}.jsonl").write_text(
        json.dumps({"ts": "2026-11-27T00:00:00Z", "session_id": sid, "type": "session_start"})
        + "\n"
    )
    log = EventStore(FileLog(history))
    try:
        assert [e["type"] async for e in log.read(sid, tenant_id="Acme")] == ["session_start"]
        assert not legacy.exists()
    finally:
        await log.aclose()
