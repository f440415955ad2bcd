"""Session-mode BuildMessages: a 10,000-message session against a 100-message one.

Both sessions belong to one user of a real server (a child process, its own
SQLite file) and hold the same kind of varied user/assistant turns. The same
call, same user message, same budget (4,000 tokens of cl100k_base) runs against
each in alternating rounds of sequential calls; the ratio of the medians says
whether the cost follows what is kept (the target: at most 2x) or the session
length. Run: ``python bench/session_build.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
from _common import USER_MESSAGE, long_history, machine_note, median, print_table, result_line
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, sessions_pb2, sessions_pb2_grpc

NAME = "session_build"
TARGET = 2.0
USER = "bench-user"
BATCH = 1000


def spawn(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "contextd", "serve", "--port", "0", "--data-dir", str(data_dir)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        entry = json.loads(line)
        if entry.get("msg") == "listening":
            address = str(entry["address"])
            break
    else:
        raise RuntimeError("the server exited before listening")
    # Keep draining the log so the server never blocks on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, address


def fill(stub: sessions_pb2_grpc.SessionServiceStub, size: int) -> str:
    sid: str = stub.CreateSession(sessions_pb2.CreateSessionRequest(user_id=USER)).session.id
    turns = long_history(size, seed=size)
    roles = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
    for start in range(0, size, BATCH):
        messages = [pb.Message(role=roles[r], content=t) for r, t in turns[start : start + BATCH]]
        stub.AppendMessages(
            sessions_pb2.AppendMessagesRequest(user_id=USER, session_id=sid, messages=messages)
        )
    return sid


def time_calls(stub: context_pb2_grpc.ContextServiceStub, sid: str, calls: int) -> float:
    request = pb.BuildMessagesRequest(
        user_message=USER_MESSAGE,
        token_budget=4000,
        tokenizer="cl100k_base",
        session=pb.SessionContext(user_id=USER, session_id=sid),
    )
    started = time.perf_counter()
    for _ in range(calls):
        stub.BuildMessages(request)
    return (time.perf_counter() - started) / calls * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, a smoke test")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    big, small = (2_000, 100) if args.quick else (10_000, 100)
    rounds, calls = (2, 10) if args.quick else (args.rounds, 60)
    print(machine_note())
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        process, address = spawn(Path(tmp))
        try:
            with grpc.insecure_channel(address) as channel:
                sessions = sessions_pb2_grpc.SessionServiceStub(channel)
                context = context_pb2_grpc.ContextServiceStub(channel)
                ids = {big: fill(sessions, big), small: fill(sessions, small)}
                first = context.BuildMessages(
                    pb.BuildMessagesRequest(
                        user_message=USER_MESSAGE,
                        token_budget=4000,
                        session=pb.SessionContext(user_id=USER, session_id=ids[big]),
                    )
                )
                kept = first.report.history_kept
                for sid in ids.values():  # warm up: token counts cached, pages in memory
                    time_calls(context, sid, 5)
                times: dict[int, list[float]] = {big: [], small: []}
                for r in range(rounds):
                    order = (big, small) if r % 2 == 0 else (small, big)
                    for size in order:
                        times[size].append(time_calls(context, ids[size], calls))
        finally:
            process.terminate()
            process.wait(15)
    ratio = median(times[big]) / median(times[small])
    print(
        f"{NAME}: budget 4000 tokens (cl100k_base), {rounds} alternating rounds of {calls} "
        f"sequential calls; the big session keeps {kept} messages"
    )
    print_table(
        ["session", "ms/call (median)", "range"],
        [
            (f"{size} messages", f"{median(ts):.2f}", f"{min(ts):.2f}-{max(ts):.2f}")
            for size, ts in times.items()
        ],
    )
    print(f"ratio {big}-message / {small}-message session: {ratio:.2f}")
    print(result_line(NAME, ratio, TARGET, ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
