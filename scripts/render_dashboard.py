"""Render docs/grafana/contextd.json as a picture from a real run, without Grafana.

Starts a real contextd (echo provider, ``--metrics-port``, the web port) and a real
Prometheus scraping it, drives a mixed load for a few minutes (BuildMessages inline and
in session mode, with now and then a long history that stalls the loop; StreamChat
turns, some cancelled by the client and some refused; memories added and searched;
Connect calls on the web port), then asks Prometheus for each panel's own expression
(``query_range``; the dashboard's variables replaced: ``$job`` by the job below,
``$instance`` by ``.*``, ``$__rate_interval`` by four scrape intervals, as Grafana
would) and plots the answers on the dashboard's grid into a PNG.

Needs the ``prometheus`` binary on PATH (Debian: ``apt-get install prometheus``) and
matplotlib (a dev dependency). Run: ``python scripts/render_dashboard.py [--minutes 4]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from matplotlib import ticker

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "contextd.json"
PICTURE = ROOT / "docs" / "grafana" / "contextd-dashboard.png"
JOB = "contextd"
CTX = "contextd.v1.ContextService"

_TEXT = (
    "the invoice for march was paid late because the supplier changed their bank "
    "account and our finance team needed a signed letter before releasing funds "
    "meeting notes project plan deadline review budget travel office printer"
)
WORDS = _TEXT.split()
FACTS = (
    "prefers answers in German",
    "works in the finance team",
    "manages the Berlin office",
    "is allergic to peanuts",
    "travels to Munich every second week",
    "uses a standing desk",
    "writes reports in LaTeX",
    "owns the printer budget",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def text(words: int) -> str:
    return " ".join(random.choice(WORDS) for _ in range(words))


def wait_until(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start within {timeout:.0f} s")
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


@dataclass
class Ports:
    grpc: int
    web: int
    metrics: int
    prometheus: int


@contextmanager
def running(work: Path, scrape_interval: int) -> Iterator[Ports]:
    """A contextd and a Prometheus scraping it, stopped on leaving."""
    if shutil.which("prometheus") is None:
        raise SystemExit("needs the prometheus binary on PATH (Debian: apt-get install prometheus)")
    ports = Ports(free_port(), free_port(), free_port(), free_port())
    contextd = subprocess.Popen(
        [
            *(sys.executable, "-m", "contextd", "serve", "--host", "127.0.0.1"),
            *("--port", str(ports.grpc), "--web-port", str(ports.web)),
            *("--metrics-port", str(ports.metrics), "--data-dir", str(work / "data")),
            *("--echo-delay-ms", "20", "--log-level", "WARNING"),
        ],
        stderr=(work / "contextd.log").open("w"),
    )
    config = work / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": f"{scrape_interval}s"},
                "scrape_configs": [
                    {
                        "job_name": JOB,
                        "static_configs": [{"targets": [f"127.0.0.1:{ports.metrics}"]}],
                    }
                ],
            }
        )
    )
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{ports.prometheus}",
        ],
        stderr=(work / "prometheus.log").open("w"),
    )
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{ports.metrics}/metrics"), "contextd")
        wait_until(lambda: answers(f"http://127.0.0.1:{ports.prometheus}/-/ready"), "prometheus")
        yield ports
    finally:
        for process in (prometheus, contextd):
            process.terminate()
            process.wait(30)


class Load:
    """Mixed calls from several workers; how busy they are rises and falls over the run."""

    def __init__(self, ports: Ports, seconds: float) -> None:
        self.ports = ports
        self.seconds = seconds
        self.start = time.monotonic()
        self.sessions: list[tuple[str, str]] = []
        self.calls = 0

    def pause(self) -> float:
        """Seconds to wait between calls: short at the peaks of two waves over the run."""
        phase = (time.monotonic() - self.start) / self.seconds
        busy = 0.55 + 0.45 * math.sin(phase * 4 * math.pi - math.pi / 2)
        return random.expovariate(1.0) * (0.02 + 0.3 * (1 - busy))

    async def worker(self, act: Callable[[], Awaitable[None]]) -> None:
        while time.monotonic() - self.start < self.seconds:
            with contextlib.suppress(grpc.aio.AioRpcError):  # refusals, on purpose
                await act()
            self.calls += 1
            await asyncio.sleep(self.pause())

    async def run(self) -> int:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{self.ports.grpc}") as channel,
            aiohttp.ClientSession() as http,
        ):
            context = context_pb2_grpc.ContextServiceStub(channel)
            chat = chat_pb2_grpc.ChatServiceStub(channel)
            memory = memory_pb2_grpc.MemoryServiceStub(channel)
            acts: list[Callable[[], Awaitable[None]]] = [
                lambda: self.inline_build(context),
                lambda: self.inline_build(context),
                lambda: self.session_build(context),
                lambda: self.chat_turn(chat),
                lambda: self.chat_turn(chat),
                lambda: self.memories(memory),
                lambda: self.web_call(http),
            ]
            await asyncio.gather(*(self.worker(act) for act in acts))
        return self.calls

    async def inline_build(self, stub: context_pb2_grpc.ContextServiceStub) -> None:
        # Now and then a long history: its build holds the loop, as the lag panel shows.
        count = 3000 if random.random() < 0.01 else random.randint(4, 60)
        history = [
            pb.Message(role=pb.ROLE_USER if i % 2 == 0 else pb.ROLE_ASSISTANT, content=text(40))
            for i in range(count)
        ]
        budget = 0 if random.random() < 0.03 else random.choice((400, 1200, 4000, 16000))
        await stub.BuildMessages(
            pb.BuildMessagesRequest(
                system_prompts=["You are a helpful assistant."],
                history=history,
                user_message=text(12),
                token_budget=budget,
            )
        )

    async def session_build(self, stub: context_pb2_grpc.ContextServiceStub) -> None:
        if not self.sessions:
            return
        user, session = random.choice(self.sessions)
        await stub.BuildMessages(
            pb.BuildMessagesRequest(
                session=pb.SessionContext(user_id=user, session_id=session),
                user_message=text(10),
                token_budget=random.choice((300, 2000, 8000)),
            )
        )

    async def chat_turn(self, stub: chat_pb2_grpc.ChatServiceStub) -> None:
        user = f"user-{random.randint(1, 12)}"
        known = [s for u, s in self.sessions if u == user]
        session = random.choice(known) if known and random.random() < 0.7 else ""
        refused = random.random() < 0.04  # neither a message nor a history: INVALID_ARGUMENT
        call = stub.StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id=user, session_id=session),
                user_message="" if refused else text(random.randint(5, 40)),
            )
        )
        cancel = random.random() < 0.1
        async for event in call:
            kind = event.WhichOneof("event")
            if kind == "turn_started" and not session:
                self.sessions.append((user, event.turn_started.session_id))
            if kind == "text_delta" and cancel:
                call.cancel()
                return

    async def memories(self, stub: memory_pb2_grpc.MemoryServiceStub) -> None:
        user = f"user-{random.randint(1, 12)}"
        if random.random() < 0.3:
            fact = f"{user} {random.choice(FACTS)}"
            await stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content=fact))
        else:
            await stub.SearchMemories(
                mpb.SearchMemoriesRequest(user_id=user, query=random.choice(FACTS), limit=5)
            )

    async def web_call(self, http: aiohttp.ClientSession) -> None:
        url = f"http://127.0.0.1:{self.ports.web}/{CTX}/CountTokens"
        async with http.post(url, json={"texts": [text(30)]}) as reply:
            await reply.read()


def variables(expr: str, scrape_interval: int) -> str:
    """The expression as Grafana would send it for this job and every instance."""
    return (
        expr.replace("$__rate_interval", f"{4 * scrape_interval}s")
        .replace("$job", JOB)
        .replace("$instance", ".*")
    )


def query(port: int, path: str, **params: str | float) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as reply:
        body = json.load(reply)
    if body["status"] != "success":
        raise SystemExit(f"prometheus refused {params.get('query')}: {body}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def tick_format(unit: str) -> ticker.Formatter:
    """Grafana's units as tick labels: seconds in ms or µs where small, ratios in %."""
    if unit == "percentunit":
        return ticker.PercentFormatter(xmax=1)
    if unit == "s":
        return ticker.EngFormatter(unit="s", sep=" ")
    if unit == "bytes":
        return ticker.EngFormatter(unit="B", sep=" ")
    if unit in ("reqps", "ops"):
        return ticker.FuncFormatter(lambda value, _: f"{value:.3g}/s")
    return ticker.FuncFormatter(
        lambda value, _: f"{value / 1000:g} k" if value >= 1000 else f"{value:g}"
    )


# Figure inches per dashboard grid unit (24 across), and a panel's title and padding.
UNIT_W, UNIT_H = 0.85, 0.42
TITLE_H, PAD, LEGEND_ROW_H = 0.45, 0.12, 0.26


def plot(dashboard: dict[str, Any], series: dict[int, list[Any]], out: Path, note: str) -> None:
    panels = dashboard["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * UNIT_H + 0.4
    width = 24 * UNIT_W
    plt.style.use("dark_background")
    figure = plt.figure(figsize=(width, height), facecolor="#111217")

    def box(x: float, top: float, w: float, h: float) -> tuple[float, float, float, float]:
        """Inches from the top-left corner, as figure fractions."""
        return (x / width, 1 - (top + h) / height, w / width, h / height)

    for panel in panels:
        pos = panel["gridPos"]
        x, top = pos["x"] * UNIT_W + PAD, pos["y"] * UNIT_H + PAD
        w, h = pos["w"] * UNIT_W - 2 * PAD, pos["h"] * UNIT_H - 2 * PAD
        if panel["type"] == "row":
            figure.text(
                x / width,
                1 - (top + h) / height,
                panel["title"],
                fontsize=17,
                weight="bold",
                color="#d8d9da",
            )
            continue
        frame = figure.add_axes(box(x, top, w, h), facecolor="#181b1f")
        frame.set_xticks([])
        frame.set_yticks([])
        for side in frame.spines.values():
            side.set_color("#2c3235")
        figure.text(
            (x + 0.15) / width,
            1 - (top + 0.1) / height,
            panel["title"],
            fontsize=14,
            weight="bold",
            color="#d8d9da",
            va="top",
        )
        lines = series[panel["id"]]
        if panel["type"] == "stat":
            shown = "\n".join(name for name, _, _ in lines) or "no data"
            frame.text(0.5, 0.45, shown, ha="center", va="center", fontsize=18, color="#5794f2")
            continue
        columns = 2 if pos["w"] <= 6 else 3
        legend_h = LEGEND_ROW_H * math.ceil(len(lines) / columns) + 0.1
        ax = figure.add_axes(
            box(x + 0.75, top + TITLE_H, w - 0.9, h - TITLE_H - legend_h - 0.3), facecolor="none"
        )
        defaults = panel["fieldConfig"]["defaults"]
        log = defaults["custom"]["scaleDistribution"]["type"] == "log"
        for name, times, values in lines:
            ax.plot(times, values, linewidth=1.6, label=name)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        elif defaults.get("min") == 0:
            ax.set_ylim(bottom=0, top=None if any(max(v) for _, _, v in lines) else 1)
        if not lines:
            ax.text(
                0.5,
                0.5,
                "no data",
                ha="center",
                va="center",
                color="#8e8e8e",
                transform=ax.transAxes,
            )
        ax.yaxis.set_major_formatter(tick_format(defaults.get("unit", "")))
        ax.xaxis.set_major_locator(mdates.MinuteLocator())  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        ax.tick_params(labelsize=11, colors="#9fa7b3")
        ax.grid(color="#2c3235", linewidth=0.7)
        for side in ax.spines.values():
            side.set_visible(False)
        if lines:
            ax.legend(
                fontsize=11,
                loc="upper left",
                bbox_to_anchor=(-0.09, -0.1),
                ncol=columns,
                frameon=False,
                handlelength=1.2,
                columnspacing=1.2,
            )
    figure.text(0.005, 0.002, note, fontsize=12, color="#8e8e8e")
    figure.savefig(out, dpi=72, facecolor=figure.get_facecolor())


def collect(
    dashboard: dict[str, Any], port: int, start: float, end: float, scrape_interval: int
) -> dict[int, list[Any]]:
    """Per panel: (legend, times, values) for each series its targets answered."""
    found: dict[int, list[Any]] = {}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        lines: list[Any] = []
        found[panel["id"]] = lines
        for target in panel["targets"]:
            expr = variables(target["expr"], scrape_interval)
            if target.get("instant"):
                for item in query(port, "query", query=expr, time=end):
                    lines.append((legend(target["legendFormat"], item["metric"]), [], []))
                continue
            result = query(
                port, "query_range", query=expr, start=start, end=end, step=scrape_interval
            )
            for item in result:
                points = [(t, float(v)) for t, v in item["values"] if not math.isnan(float(v))]
                if points:
                    times = [datetime.fromtimestamp(t) for t, _ in points]
                    name = legend(target["legendFormat"], item["metric"])
                    lines.append((name, times, [v for _, v in points]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=4, help="how long the load runs")
    parser.add_argument("--scrape-interval", type=int, default=5, help="seconds")
    parser.add_argument("--out", type=Path, default=PICTURE)
    args = parser.parse_args()
    dashboard = json.loads(DASHBOARD.read_text())
    with (
        tempfile.TemporaryDirectory(prefix="render-dashboard-") as tmp,
        running(Path(tmp), args.scrape_interval) as ports,
    ):
        start = time.time()
        calls = asyncio.run(Load(ports, args.minutes * 60).run())
        time.sleep(2 * args.scrape_interval)  # the last calls scraped
        end = time.time()
        series = collect(dashboard, ports.prometheus, start, end, args.scrape_interval)
        version = query(ports.prometheus, "query", query="contextd_build_info")[0]["metric"]
    note = (
        f"Rendered by scripts/render_dashboard.py from a real run: contextd "
        f"{version['version']} (echo provider, SQLite), {calls} calls over "
        f"{args.minutes:g} min, scraped every {args.scrape_interval} s by Prometheus; "
        f"each panel's own expression, evaluated by Prometheus."
    )
    plot(dashboard, series, args.out, note)
    print(f"{args.out}: {calls} calls, {sum(map(len, series.values()))} series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
