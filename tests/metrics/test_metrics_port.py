"""``--metrics-port``: a real server's ``GET /metrics`` after real calls, on the native
port and the web port; without the flag, no metrics port at all."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc
from contextd.v1 import context_pb2 as pb

from tests.support.metrics_scrape import logged_address, scrape, scrape_until, value
from tests.support.pg_databases import TEMPLATE
from tests.support.postgres import PostgresServer
from tests.support.sdk import free_port
from tests.support.server import ServerProcess, start_server

CTX = "contextd.v1.ContextService"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("metrics"),
        *("--metrics-port", str(free_port()), "--web-port", "0"),
    )
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as channel:
        yield channel


def _build(channel: grpc.Channel, budget: int) -> None:
    stub = context_pb2_grpc.ContextServiceStub(channel)
    request = pb.BuildMessagesRequest(
        user_message="and now?",
        token_budget=budget,
        history=[pb.Message(role=pb.ROLE_USER, content="hello " * 50)] * 20,
    )
    stub.BuildMessages(request)


def test_build_messages_is_counted_and_timed(server: ServerProcess, channel: grpc.Channel) -> None:
    labels = {"grpc_service": CTX, "grpc_method": "BuildMessages", "grpc_type": "unary"}
    before = scrape(server)
    _build(channel, 300)  # too small for the whole history: some is dropped
    after = scrape(server)
    assert value(after, "grpc_server_started_total", **labels) == (
        value(before, "grpc_server_started_total", **labels) + 1
    )
    ok = {**labels, "grpc_code": "OK"}
    assert value(after, "grpc_server_handled_total", **ok) == (
        value(before, "grpc_server_handled_total", **ok) + 1
    )
    count = "grpc_server_handling_seconds_count"
    assert value(after, count, **labels) == value(before, count, **labels) + 1
    assert value(after, "grpc_server_handling_seconds_bucket", le="+Inf", **labels) >= 1
    assert value(after, "contextd_build_kept_tokens_count") >= 1
    assert value(after, "contextd_build_dropped_messages_total", reason="budget") > value(
        before, "contextd_build_dropped_messages_total", reason="budget"
    )


def test_a_refused_call_is_counted_with_its_code(
    server: ServerProcess, channel: grpc.Channel
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        _build(channel, 0)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    refused = {"grpc_method": "BuildMessages", "grpc_code": "INVALID_ARGUMENT"}
    samples = scrape_until(
        server, lambda samples: value(samples, "grpc_server_handled_total", **refused) >= 1
    )
    assert value(samples, "grpc_server_handled_total", **refused) >= 1


def test_a_chat_turn_records_the_turn_the_model_call_and_the_store(
    server: ServerProcess, channel: grpc.Channel
) -> None:
    stub = chat_pb2_grpc.ChatServiceStub(channel)
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=f"m-{uuid.uuid4().hex[:8]}"),
        user_message="tell me something",
    )
    before = scrape(server)
    events = list(stub.StreamChat(request))
    assert events[-1].WhichOneof("event") == "turn_completed"
    after = scrape(server)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    stream = {"grpc_method": "StreamChat", "grpc_type": "server_stream", "grpc_code": "OK"}
    assert moved("grpc_server_handled_total", **stream) == 1
    assert moved("contextd_chat_turns_total", status="ok") == 1
    assert moved("contextd_chat_first_delta_seconds_count") == 1
    model = {"gen_ai_system": "echo", "gen_ai_operation_name": "chat", "error_type": ""}
    assert moved("gen_ai_client_operation_duration_seconds_count", **model) == 1
    for kind in ("input", "output"):
        tokens = moved(
            "gen_ai_client_token_usage_sum", gen_ai_system="echo", gen_ai_token_type=kind
        )
        assert tokens > 0, kind
    assert moved("contextd_memory_search_seconds_count") >= 1
    assert moved("contextd_store_statement_seconds_count", engine="sqlite", statement="INSERT") > 0
    assert value(after, "contextd_database_size_bytes") > 0
    assert value(after, "contextd_after_turn_pending") >= 0
    assert value(after, "contextd_event_loop_lag_seconds_count") >= 0
    [info] = [s for s in after if s.name == "contextd_build_info"]
    assert info.value == 1 and info.labels["version"] and info.labels["python"]


def test_the_event_loop_lag_is_observed_four_times_a_second(server: ServerProcess) -> None:
    lag = "contextd_event_loop_lag_seconds_count"
    samples = scrape_until(server, lambda samples: value(samples, lag) >= 2)
    assert value(samples, lag) >= 2
    assert value(samples, "contextd_event_loop_lag_seconds_sum") < value(samples, lag)


def test_a_web_port_call_is_counted_once_and_by_protocol(
    server: ServerProcess, channel: grpc.Channel
) -> None:
    labels = {"grpc_method": "CountTokens", "grpc_code": "OK"}
    before = scrape(server)
    web = logged_address(server, "grpc-web listening")
    request = urllib.request.Request(
        f"http://{web}/{CTX}/CountTokens",
        data=json.dumps({"texts": ["one two three"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert json.loads(reply.read())["totalTokens"] > 0
    after = scrape(server)
    assert value(after, "grpc_server_handled_total", **labels) == (
        value(before, "grpc_server_handled_total", **labels) + 1
    )
    web_call = {"protocol": "connect", "grpc_code": "OK"}
    assert value(after, "contextd_web_requests_total", **web_call) == (
        value(before, "contextd_web_requests_total", **web_call) + 1
    )


def test_without_the_flag_there_is_no_metrics_port(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        assert proc.logs("metrics listening") == []
    finally:
        assert proc.stop() == 0


def test_on_postgresql_statements_and_the_database_size_are_recorded(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.create_database(f"metrics_{uuid.uuid4().hex[:12]}", template=TEMPLATE)
    proc = start_server(tmp_path, "--metrics-port", str(free_port()), database_url=url)
    try:
        with grpc.insecure_channel(proc.address) as channel:
            stub = chat_pb2_grpc.ChatServiceStub(channel)
            request = cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="pg-metrics"), user_message="hello"
            )
            list(stub.StreamChat(request))
        samples = scrape(proc)
    finally:
        assert proc.stop() == 0
    statements = {"engine": "postgresql", "statement": "INSERT"}
    assert value(samples, "contextd_store_statement_seconds_count", **statements) > 0
    assert value(samples, "contextd_database_size_bytes") > 0
