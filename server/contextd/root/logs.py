"""Structured logging: one JSON object per line on stderr."""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time

from opentelemetry import trace

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
# What json.dumps(entry, ensure_ascii=False, default=str) makes, without a new encoder per line.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=4)
def _second(seconds: int) -> str:
    # Lines come in bursts within one second: its text is made once.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": f"{_second(int(record.created))}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # Written inside a span: its ids, so that the line leads to its trace. Inside a
        # call whose caller sent a trace but which has no span of its own (tracing off),
        # the caller's trace id alone.
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = trace.format_trace_id(span.trace_id)
            if not span.is_remote:
                entry["span_id"] = trace.format_span_id(span.span_id)
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _ENCODER.encode(entry)


class ClientGoneFilter(logging.Filter):
    """grpcio logs a stream write that failed because the client had just gone away (a
    cancel, a passed deadline) as an error of the servicer, when it only lost the race
    with the cancellation it would otherwise ignore. That is how a call ends, not an
    error: logged at INFO, without the traceback. (The call's own line says CANCELLED.)"""

    # The two wordings grpcio uses, depending on where the failed write surfaced.
    PATTERN = re.compile(
        r"(?:Unexpected \[ExecuteBatchError\] raised|ExecuteBatchError raised in core)"
        r" by servicer method \[(?P<method>[^\]]*)\]"
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            match = self.PATTERN.match(record.getMessage())
            if match:
                record.levelno, record.levelname = logging.INFO, "INFO"
                record.msg = "a stream write failed: the client had gone away (%s)"
                record.args = (match.group("method"),)
                record.exc_info = record.exc_text = None
        return True


GRPC_LOGGER = "grpc._cython.cygrpc"


def configure(level: str) -> None:
    # A line shows none of what the logging module finds out per record by default (the
    # caller's file and line from the stack, the thread, the process): not looked up.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    grpc_logger = logging.getLogger(GRPC_LOGGER)
    if not any(isinstance(f, ClientGoneFilter) for f in grpc_logger.filters):
        grpc_logger.addFilter(ClientGoneFilter())
