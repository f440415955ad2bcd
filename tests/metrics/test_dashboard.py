"""docs/grafana/contextd.json: import-shaped, and every metric and label its panels ask
for exists in a real server's scrape and in docs/metrics.md; with promtool, every
expression parses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from prometheus_client.samples import Sample

from tests.support.metrics_scrape import logged_address, scrape_until
from tests.support.paths import ROOT
from tests.support.promql import bare_names, grouping_labels, selectors
from tests.support.sdk import free_port
from tests.support.server import ServerProcess, start_server

DASHBOARD = ROOT / "docs" / "grafana" / "contextd.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
# Labels Prometheus adds to every series it scrapes: not in the server's own output.
TARGET_LABELS = {"job", "instance"}
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
HISTOGRAM_PARTS = ("_bucket", "_count", "_sum")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _targets() -> list[tuple[str, dict[str, Any]]]:
    return [
        (panel["title"], target)
        for panel in _dashboard()["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def _as_sent(expr: str) -> str:
    """The expression with the dashboard's variables as Grafana fills them in."""
    return (
        expr.replace("$__rate_interval", "1m")
        .replace("$job", "contextd")
        .replace("$instance", ".*")
    )


@pytest.fixture(scope="module")
def labels_by_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, set[str]]]:
    """Each sample name of a scrape after the calls the dashboard shows, with the labels
    its samples carry."""
    proc = start_server(
        tmp_path_factory.mktemp("dashboard"),
        *("--metrics-port", str(free_port()), "--web-port", "0"),
    )
    try:
        _serve_a_few_calls(proc)
        found: dict[str, set[str]] = {}
        web_counted = scrape_until(proc, lambda samples: any(_web_calls(s) for s in samples))
        for sample in web_counted:
            found.setdefault(sample.name, set()).update(sample.labels)
        yield found
    finally:
        assert proc.stop() == 0


def _web_calls(sample: Sample) -> bool:
    return sample.name == "contextd_web_requests_total"


def _serve_a_few_calls(proc: ServerProcess) -> None:
    user = f"dash-{uuid.uuid4().hex[:8]}"
    with grpc.insecure_channel(proc.address) as channel:
        context = context_pb2_grpc.ContextServiceStub(channel)
        history = [pb.Message(role=pb.ROLE_USER, content="hello " * 50)] * 20
        context.BuildMessages(  # too small a budget for the history: some is dropped
            pb.BuildMessagesRequest(user_message="and now?", token_budget=300, history=history)
        )
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        turn = cpb.StreamChatRequest(session=pb.SessionContext(user_id=user), user_message="hi")
        list(chat.StreamChat(turn))
        memory = memory_pb2_grpc.MemoryServiceStub(channel)
        memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="likes tea"))
        memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=user, query="tea"))
    web = logged_address(proc, "grpc-web listening")
    request = urllib.request.Request(
        f"http://{web}/contextd.v1.ContextService/CountTokens",
        data=json.dumps({"texts": ["one two"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        reply.read()


def test_the_dashboard_is_import_shaped() -> None:
    dashboard = _dashboard()
    [source] = dashboard["__inputs"]
    assert (source["name"], source["type"], source["pluginId"]) == (
        "DS_PROMETHEUS",
        "datasource",
        "prometheus",
    )
    assert dashboard["id"] is None and dashboard["uid"] and dashboard["title"]
    assert dashboard["schemaVersion"] >= 39
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"job", "instance"}
    for variable in variables.values():
        assert variable["type"] == "query" and variable["datasource"] == DATASOURCE
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(set(ids)) == len(ids)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert refs and len(set(refs)) == len(refs), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"], panel["title"]


def test_every_expression_names_its_metrics_with_the_job_and_instance_matchers() -> None:
    for title, target in _targets():
        expr = target["expr"]
        assert not bare_names(expr), (title, expr)
        found = selectors(expr)
        assert found, (title, expr)
        for selector in found:
            assert set(selector.labels) >= TARGET_LABELS, (title, expr)


def test_every_metric_and_label_of_a_panel_is_in_a_real_scrape(
    labels_by_name: dict[str, set[str]],
) -> None:
    for title, target in _targets():
        expr = target["expr"]
        grouped = grouping_labels(expr) - TARGET_LABELS
        for selector in selectors(expr):
            assert selector.metric in labels_by_name, (title, selector.metric)
            present = labels_by_name[selector.metric]
            asked = grouped | set(selector.labels) - TARGET_LABELS
            assert asked <= present, (title, selector.metric, asked - present)
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            assert legend - TARGET_LABELS <= present | grouped, (title, legend)


def test_every_metric_of_a_panel_is_in_the_manual() -> None:
    documented = set(re.findall(r"`([a-z_:]+)`", METRICS_DOC.read_text()))
    for title, target in _targets():
        for selector in selectors(target["expr"]):
            name = selector.metric
            base = next((name[: -len(p)] for p in HISTOGRAM_PARTS if name.endswith(p)), name)
            assert name in documented or base in documented, (title, name)


def test_every_expression_parses(tmp_path: Path) -> None:
    """promtool reads the expressions as recording rules; without promtool this skips,
    except under CI, which installs it."""
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = "promtool (Debian: the prometheus package) is not installed"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    rules = [
        {"record": f"dashboard:check_{number}", "expr": _as_sent(target["expr"])}
        for number, (_, target) in enumerate(_targets())
    ]
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
