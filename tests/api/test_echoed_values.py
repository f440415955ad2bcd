"""Whatever a request holds, what comes back and what is logged stays short: an id that
cannot be an id is refused as INVALID_ARGUMENT naming its field before anything is
looked up, every value an error or a log line quotes is cut, a status's trailers stay
far below the 8 KiB of metadata grpc's clients accept by default (a client with the
defaults gets the answer, not RESOURCE_EXHAUSTED), and one call writes one short audit
line. Requests are made from the descriptors: an RPC or field added later is covered."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from tests.support.auth import Rpc, every_rpc
from tests.support.server import ServerProcess, start_server
from tests.support.status import violations

HUGE = "x" * 100_000
# What one call may send back in trailers (grpc-message and the status details): a
# client's default limit is 8 KiB, and its other trailers need room too.
MAX_TRAILERS = 4096
MAX_LOG_LINE = 2048
UNARY = [rpc for rpc in every_rpc() if not rpc.method.client_streaming]
# Endings of the fields that name a stored session, message or memory.
_ID_ENDINGS = ("session_id", "message_id", "message_ids", "memory_id", "memory_ids")


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("echoed"))
    yield server
    assert server.stop() == 0
    # Every line the module's calls made (access, audit, warnings) is short.
    longest = max(server.log_lines, key=lambda line: len(json.dumps(line, ensure_ascii=False)))
    assert len(json.dumps(longest, ensure_ascii=False)) < MAX_LOG_LINE, longest


@pytest.fixture(scope="module")
def channel(proc: ServerProcess) -> Iterator[grpc.Channel]:
    # grpc's defaults: a status over its metadata limit would fail as RESOURCE_EXHAUSTED.
    with grpc.insecure_channel(proc.address) as channel:
        yield channel


def id_fields(rpc: Rpc) -> list[str]:
    """The fields of ``rpc``'s request that name a stored resource: at the top and in
    its ``session``."""
    found = []
    for field in rpc.method.input_type.fields:
        if field.type == FieldDescriptor.TYPE_STRING and field.name.endswith(_ID_ENDINGS):
            found.append(field.name)
        if field.name == "session" and field.message_type is not None:
            found += [
                f"session.{f.name}" for f in field.message_type.fields if f.name == "session_id"
            ]
    return found


ID_CASES = [(rpc, field) for rpc in UNARY for field in id_fields(rpc)]


def test_every_rpc_naming_a_stored_resource_is_covered() -> None:
    covered = {rpc.path for rpc, _ in ID_CASES}
    # Those that name a session, message or memory; more join as RPCs are added.
    assert {
        "contextd.v1.SessionService/GetSession",
        "contextd.v1.ContextService/Collect",
        "contextd.v1.MemoryService/DeleteMemory",
        "contextd.v1.ChatService/StreamChat",
        "contextd.v1.ContextService/BuildMessages",
        "contextd.v1.MemoryService/AddMemory",
    } <= covered


def call(channel: grpc.Channel, rpc: Rpc, request: Message) -> grpc.RpcError | None:
    """The call's error (a stream is read to its end); None when it succeeded."""
    path, data = "/" + rpc.path, request.SerializeToString()
    try:
        if rpc.method.server_streaming:
            for _ in channel.unary_stream(path, _raw, _raw)(data, timeout=30):
                pass
        else:
            channel.unary_unary(path, _raw, _raw)(data, timeout=30)
    except grpc.RpcError as error:
        return error
    return None


def trailer_bytes(error: grpc.RpcError) -> int:
    trailing = error.trailing_metadata() or ()  # type: ignore[attr-defined]
    sent = sum(len(key) + len(value) for key, value in trailing)
    return sent + len((error.details() or "").encode())  # type: ignore[attr-defined]


def _set(request: Message, path: str, value: str) -> None:
    *parents, leaf = path.split(".")
    target = request
    for name in parents:
        target = getattr(target, name)
    if target.DESCRIPTOR.fields_by_name[leaf].is_repeated:
        getattr(target, leaf).append(value)
    else:
        setattr(target, leaf, value)


@pytest.mark.parametrize(("rpc", "field"), ID_CASES, ids=lambda x: str(x).rsplit("/", 1)[-1])
def test_an_id_of_100000_characters_is_refused_before_any_lookup(
    channel: grpc.Channel, proc: ServerProcess, rpc: Rpc, field: str
) -> None:
    request = rpc.request("echo-user")
    _set(request, field, HUGE)
    error = call(channel, rpc, request)
    assert error is not None
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error  # type: ignore[attr-defined]
    assert any(v == field or v.startswith(f"{field}[") for v in violations(error)), error
    assert trailer_bytes(error) < MAX_TRAILERS
    assert "x" * 100 not in (error.details() or "")  # type: ignore[attr-defined]
    audited = proc.wait_for_logs(
        "audit",
        lambda line: line["method"] == f"/{rpc.path}" and line["code"] == "INVALID_ARGUMENT",
    )
    assert audited and all(len(json.dumps(line)) < MAX_LOG_LINE for line in audited)


def string_paths(rpc: Rpc) -> list[str]:
    """Every string field of the request, at the top and one message down (a repeated
    message's first item), and map keys as ``field{}``."""
    paths = []
    for field in rpc.method.input_type.fields:
        paths += _strings_of(field, field.name, deeper=True)
    return paths


def _strings_of(field: FieldDescriptor, path: str, deeper: bool) -> list[str]:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        return [f"{path}{{}}"]
    if message is None:
        return [path] if field.type == FieldDescriptor.TYPE_STRING else []
    if not deeper:
        return []
    at = f"{path}[0]" if field.is_repeated else path
    return [p for f in message.fields for p in _strings_of(f, f"{at}.{f.name}", deeper=False)]


def _filled(rpc: Rpc, path: str, value: str) -> Message:
    """``rpc``'s request for ``echo-user`` with ``value`` at ``path``."""
    request = rpc.request("echo-user")
    target: Message = request
    parts = path.split(".")
    for part in parts[:-1]:
        name, _, index = part.partition("[")
        target = getattr(target, name).add() if index else getattr(target, name)
    leaf = parts[-1]
    if leaf.endswith("{}"):  # the protos' maps are of strings to strings
        getattr(target, leaf[:-2])[value] = "v"
    else:
        _set(target, leaf, value)
    return request


STRING_CASES = [(rpc, path) for rpc in UNARY for path in string_paths(rpc)]


@pytest.mark.parametrize(("rpc", "path"), STRING_CASES, ids=lambda x: str(x).rsplit("/", 1)[-1])
def test_any_string_of_100000_characters_comes_back_cut(
    channel: grpc.Channel, rpc: Rpc, path: str
) -> None:
    error = call(channel, rpc, _filled(rpc, path, HUGE))
    if error is not None:  # some take long text (a message's content): only errors count
        code = error.code()  # type: ignore[attr-defined]
        assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), error
        assert code != grpc.StatusCode.RESOURCE_EXHAUSTED, error  # the client's limit
        assert trailer_bytes(error) < MAX_TRAILERS
        assert "x" * 100 not in (error.details() or "")  # type: ignore[attr-defined]


def test_thousands_of_bad_fields_fit_in_one_status(channel: grpc.Channel) -> None:
    """Every bad field that fits is named; the rest are counted."""
    history = [pb.Message(role=99, content="x") for _ in range(5000)]
    request = pb.BuildMessagesRequest(user_message="hi", token_budget=100, history=history)
    [rpc] = [r for r in UNARY if r.path.endswith("/BuildMessages")]
    error = call(channel, rpc, request)
    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    named = violations(error)
    assert 10 <= len(named) < 5000 and named[:2] == ["history[0].role", "history[1].role"]
    assert trailer_bytes(error) < MAX_TRAILERS
    details = error.details() or ""  # type: ignore[attr-defined]
    assert (
        details.endswith("(5000 bad fields in all)") or f"; and {5000 - len(named)} more" in details
    )


def test_an_unknown_session_is_quoted_cut(channel: grpc.Channel) -> None:
    [rpc] = [r for r in UNARY if r.path.endswith("/GetSession")]
    long_but_well_formed = "a" * 64
    error = call(channel, rpc, spb.GetSessionRequest(user_id="u", session_id=long_but_well_formed))
    assert error is not None and error.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    assert error.details() == f"no session with id {'a' * 40!r}…(+24 chars)"  # type: ignore[attr-defined]


def _raw(data: bytes) -> bytes:
    return data
