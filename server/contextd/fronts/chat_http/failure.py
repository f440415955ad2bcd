"""A request answered with an error: its HTTP status, message, the parameter at fault
and the headers it needs, which each front renders in its protocol's shape; and the
native call's gRPC status mapped to them.

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
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.http_status import http_status

_DETAILS_KEY = "grpc-status-details-bin"
_EXCERPT = 40
_LONGEST_MESSAGE = 300

# The error code of a native status, as the model APIs name the same kind of failure
# (its HTTP status is every HTTP front's, fronts.http_status).
_CODES: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.FAILED_PRECONDITION: "context_length_exceeded",
    grpc.StatusCode.UNAUTHENTICATED: "invalid_api_key",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "rate_limit_exceeded",
    grpc.StatusCode.UNAVAILABLE: "service_unavailable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "timeout",
    grpc.StatusCode.CANCELLED: "cancelled",
}


@dataclass
class HttpFailure(Exception):
    """A request answered with an error instead of an answer."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # The native call's status, for the web port's metrics: None when no call was made
    # (the request was refused here).
    native_code: grpc.StatusCode | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def metric_code(self) -> grpc.StatusCode:
        """The status the request counts as in the web port's metrics."""
        if self.native_code is not None:
            return self.native_code
        return grpc.StatusCode.INVALID_ARGUMENT if self.status < 500 else grpc.StatusCode.INTERNAL


def invalid(param: str | None, message: str, code: str | None = None) -> HttpFailure:
    """A 400 naming the parameter at fault."""
    where = f"{param}: " if param else ""
    return HttpFailure(400, f"{where}{message}", param=param, code=code)


def excerpt(value: object) -> str:
    """A short quotation of something the caller sent."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown(text, _EXCERPT)


def from_rpc_error(error: grpc.aio.AioRpcError, params: ParamMap | None = None) -> HttpFailure:
    """The failure of a native call: the native message, the parameter of its first bad
    field (translated to the request's own names), and for RESOURCE_EXHAUSTED the time
    to wait as ``Retry-After``."""
    code = error.code()
    details = error.details() or ""
    status, error_code = http_status(code), _CODES.get(code)
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
        status, error_code = 413, "request_too_large"
    message = cut(details or code.name.lower(), _LONGEST_MESSAGE)  # it may quote the caller
    return HttpFailure(status, message, param, error_code, headers, code)


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
    """``headers`` with ``x-should-retry``, which the model APIs' SDKs obey instead of
    their own rule (they retry 408, 409, 429 and 5xx)."""
    return {**headers, "x-should-retry": "true" if allowed else "false"}
