"""The JSON log lines and what they make of grpcio's own records."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from contextd.root import logs


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure() replaces the root handlers: give the other tests theirs back."""
    root, grpc_logger = logging.getLogger(), logging.getLogger(logs.GRPC_LOGGER)
    handlers, level, filters = root.handlers[:], root.level, grpc_logger.filters[:]
    yield
    root.handlers[:], grpc_logger.filters[:] = handlers, filters
    root.setLevel(level)


class ExecuteBatchError(Exception):
    """Stands in for grpcio's exception of the same name (only its name is logged)."""


@pytest.mark.parametrize(
    "template",
    [
        "Unexpected [%s] raised by servicer method [%s]",
        "%s raised in core by servicer method [%s]",
    ],
)
def test_a_write_to_a_client_gone_is_info_without_traceback(
    template: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO")
    grpc_logger = logging.getLogger(logs.GRPC_LOGGER)
    try:
        raise ExecuteBatchError("Failed 'execute_batch': (<grpc._cython.cygrpc.SendMessage>,)")
    except ExecuteBatchError as error:
        grpc_logger.exception(template, type(error).__name__, "/contextd.v1.ChatService/StreamChat")
    [line] = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert entry["level"] == "INFO"
    assert entry["logger"] == logs.GRPC_LOGGER
    assert entry["msg"] == (
        "a stream write failed: the client had gone away (/contextd.v1.ChatService/StreamChat)"
    )
    assert "exc" not in entry


def test_other_grpc_errors_stay_errors(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("INFO")
    logs.configure("INFO")  # configuring twice adds the filter once
    grpc_logger = logging.getLogger(logs.GRPC_LOGGER)
    assert sum(isinstance(f, logs.ClientGoneFilter) for f in grpc_logger.filters) == 1
    try:
        raise ValueError("boom")
    except ValueError:
        grpc_logger.exception("Unexpected [ValueError] raised by servicer method [/x/Y]")
    entry = json.loads(capsys.readouterr().err.splitlines()[0])
    assert entry["level"] == "ERROR"
    assert "ValueError: boom" in entry["exc"]
