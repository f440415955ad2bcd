"""What ``--metrics-port`` costs BuildMessages, counted in instructions rather than time.

Timings on a shared machine move by more than the metrics cost; instruction counts
barely do. Each side is a server child (``metrics_cost.py --serve``, with or without
``--metrics-port``) run under ``valgrind --tool=callgrind`` with counting off; after a
warm-up the client turns counting on (``callgrind_control``), sends ``--calls``
BuildMessages calls one at a time (the request of build_vs_echo.py), turns it off, and
the child's instructions in all its threads are read from callgrind's output. Sides
alternate (off, on, off, ...) for ``--rounds`` pairs. The result is the median over
pairs of ``instructions per call with metrics ÷ without``; the target is ≤ 1.05.
Needs valgrind. Run: ``python bench/metrics_instructions.py [--quick]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
from _common import free_port, machine_note, median, print_table, result_line
from build_vs_echo import BUILD_METHOD, build_request

NAME = "metrics_instructions"
TARGET = 1.05
SERVER = Path(__file__).with_name("metrics_cost.py")
WARMUP = 200


def _same(data: bytes) -> bytes:
    return data


def instructions_per_call(metrics: bool, calls: int, log_level: str, work: Path) -> float:
    out = work / f"callgrind-{'on' if metrics else 'off'}.out"
    out.unlink(missing_ok=True)
    command = [
        *("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"),
        *(sys.executable, str(SERVER), "--serve", "--log-level", log_level),
    ]
    if metrics:
        command += ["--metrics-port", str(free_port())]
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        port = int(child.stdout.readline().split()[1])
        payload = build_request().SerializeToString()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(BUILD_METHOD, _same, _same)
            for _ in range(WARMUP):
                call(payload)
            subprocess.run(
                ["callgrind_control", "-i", "on", str(child.pid)], check=True, capture_output=True
            )
            for _ in range(calls):
                call(payload)
            subprocess.run(
                ["callgrind_control", "-i", "off", str(child.pid)], check=True, capture_output=True
            )
    finally:
        child.stdin.close()
        child.wait(300)
    found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no instruction total in {out}")
    return int(found.group(1)) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--rounds", type=int, help="pairs of runs (default 3, quick 1)")
    parser.add_argument("--calls", type=int, help="counted calls per run (default 2000, quick 200)")
    parser.add_argument("--log-level", default="INFO", help="server log level, or OFF")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind (Debian: apt-get install valgrind)")
    rounds = args.rounds or (1 if args.quick else 3)
    calls = args.calls or (200 if args.quick else 2000)
    print(machine_note(), flush=True)
    rows, ratios = [], []
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        for n in range(rounds):
            off = instructions_per_call(False, calls, args.log_level, Path(tmp))
            on = instructions_per_call(True, calls, args.log_level, Path(tmp))
            ratios.append(on / off)
            rows.append(
                [str(n + 1), f"{off:,.0f}", f"{on:,.0f}", f"{on - off:,.0f}", f"{on / off:.3f}"]
            )
            print(f"pair {n + 1}: off {off:,.0f}, on {on:,.0f} instructions a call", flush=True)
    print_table(["pair", "off Ir/call", "on Ir/call", "difference", "on ÷ off"], rows)
    ratio = median(ratios)
    print(result_line(NAME, ratio, TARGET, ratio <= TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
