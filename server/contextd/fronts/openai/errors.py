"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with
the HTTP status OpenAI answers with, and the native call's gRPC status mapped to both.

A message never carries more than a short excerpt of what the caller sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from contextd.core.errors import cut, shown
from contextd.fronts.http_status import http_status
from contextd.fronts.openai.params import ParamMap

_DETAILS_KEY = "grpc-status-details-bin"
_EXCERPT = 40
_LONGEST_MESSAGE = 300

# type and code of each native status, as OpenAI answers the same kind of failure.
_MAPPED: dict[grpc.StatusCode, tuple[str, str | None]] = {
    grpc.StatusCode.INVALID_ARGUMENT: ("invalid_request_error", None),
    grpc.StatusCode.FAILED_PRECONDITION: ("invalid_request_error", "context_length_exceeded"),
    grpc.StatusCode.OUT_OF_RANGE: ("invalid_request_error", None),
    grpc.StatusCode.UNAUTHENTICATED: ("invalid_request_error", "invalid_api_key"),
    grpc.StatusCode.PERMISSION_DENIED: ("permission_error", None),
    grpc.StatusCode.NOT_FOUND: ("invalid_request_error", "not_found"),
    grpc.StatusCode.ALREADY_EXISTS: ("invalid_request_error", None),
    grpc.StatusCode.ABORTED: ("invalid_request_error", None),
    grpc.StatusCode.RESOURCE_EXHAUSTED: ("rate_limit_error", "rate_limit_exceeded"),
    grpc.StatusCode.UNAVAILABLE: ("server_error", "service_unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: ("server_error", "timeout"),
    grpc.StatusCode.CANCELLED: ("server_error", "cancelled"),
    grpc.StatusCode.UNIMPLEMENTED: ("server_error", None),
}
_SERVER_ERROR = ("server_error", None)


@dataclass
class OpenAIError(Exception):
    """A request answered with an error instead of a completion."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # The native call's status, for the web port's metrics: None when no call was made
    # (the request was refused here).
    native_code: grpc.StatusCode | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def json(self) -> str:
        return json.dumps(self.body(), ensure_ascii=False)


def invalid(param: str | None, message: str, code: str | None = None) -> OpenAIError:
    """A 400 naming the parameter at fault."""
    where = f"{param}: " if param else ""
    return OpenAIError(400, f"{where}{message}", param=param, code=code)


def excerpt(value: object) -> str:
    """A short quotation of something the caller sent."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown(text, _EXCERPT)


def from_rpc_error(error: grpc.aio.AioRpcError, params: ParamMap | None = None) -> OpenAIError:
    """The error for a native call that failed: the native message, the parameter of its
    first bad field (translated to the request's own names), and for RESOURCE_EXHAUSTED
    the time to wait as ``Retry-After``."""
    code = error.code()
    details = error.details() or ""
    status = http_status(code)
    kind, error_code = _MAPPED.get(code, _SERVER_ERROR)
    # A grpc.aio.Metadata of (key, value) pairs (the stubs say otherwise).
    trailing: Any = error.trailing_metadata() or ()
    decoded = _status_details([(str(key), value) for key, value in trailing])
    param = None
    headers: dict[str, str] = {}
    for detail in decoded.details if decoded is not None else ():
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR) and params is not None:
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            # Each bad field under the caller's own name for it.
            named = [
                (params.translate(v.field) or v.field, v.description) for v in bad.field_violations
            ]
            if named:
                param = named[0][0]
                details = "; ".join(f"{field}: {description}" for field, description in named)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            seconds = retry.retry_delay.ToMilliseconds() / 1000
            headers["Retry-After"] = str(max(1, int(-(-seconds // 1))))
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and "Retry-After" not in headers:
        # Over --max-message-bytes, not a rate: a retry would fail the same way.
        status, kind, error_code = 413, "invalid_request_error", "request_too_large"
    message = cut(details or code.name.lower(), _LONGEST_MESSAGE)  # it may quote the caller
    return OpenAIError(status, message, kind, param, error_code, headers, code)


def _status_details(
    trailing: Sequence[tuple[str, str | bytes]],
) -> status_pb2.Status | None:
    raw = dict(trailing).get(_DETAILS_KEY)
    if not isinstance(raw, bytes):
        return None
    try:
        return status_pb2.Status.FromString(raw)
    except ValueError:
        return None


def retry_advice(headers: Mapping[str, str], allowed: bool) -> dict[str, str]:
    """``headers`` with ``x-should-retry``, which the OpenAI SDKs obey instead of their own
    rule (they retry 408, 409, 429 and 5xx)."""
    return {**headers, "x-should-retry": "true" if allowed else "false"}
