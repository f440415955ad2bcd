"""gRPC errors -> ContextdError, with the google.rpc.BadRequest field violations decoded."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad request field, named as in the proto request, e.g. ``history[0].role``."""

    field: str
    description: str


class ContextdError(Exception):
    """A failed contextd call.

    ``code`` is the gRPC status code, ``message`` the server's message, and
    ``violations`` the field violations of an INVALID_ARGUMENT error (empty for
    other codes). ``status`` is the full ``google.rpc.Status`` when the server sent
    one. The original ``grpc.RpcError`` is the exception's ``__cause__``.
    """

    code: grpc.StatusCode
    message: str
    violations: list[FieldViolation]
    status: status_pb2.Status | None

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        violations: Iterable[FieldViolation] = (),
        status: status_pb2.Status | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.status = status

    @property
    def fields(self) -> list[str]:
        """Names of the violated fields, in the server's order."""
        return [v.field for v in self.violations]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message, self.violations, self.status))

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> ContextdError:
        """Build the error for a failed call (does not set ``__cause__``; raise it ``from``)."""
        code = _call_result(error, "code")
        if not isinstance(code, grpc.StatusCode):
            code = grpc.StatusCode.UNKNOWN
        details = _call_result(error, "details")
        message = details if isinstance(details, str) else str(error)
        status = _rich_status(error)
        violations: list[FieldViolation] = []
        if status is not None:
            for detail in status.details:
                if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    bad_request = error_details_pb2.BadRequest()
                    if detail.Unpack(bad_request):
                        violations.extend(
                            FieldViolation(v.field, v.description)
                            for v in bad_request.field_violations
                        )
        return cls(code, message, violations, status)


class InvalidResponseError(ContextdError, ValueError):
    """The call succeeded but its response cannot be decoded.

    Raised when ``BuildMessagesResponse.payload_json`` is not a JSON object. ``code``
    is INTERNAL, as gRPC reports a response it cannot deserialize; ``status`` is
    ``None`` and ``violations`` empty. The decoding error, if any, is ``__cause__``.
    Being a ``ContextdError`` and a ``ValueError``, it is caught as either.
    """

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.INTERNAL, message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))


def _call_result(error: grpc.RpcError, name: str) -> object:
    # A bare grpc.RpcError (raised by custom interceptors, say) has no call methods.
    method = getattr(error, name, None)
    return method() if callable(method) else None


def _rich_status(error: grpc.RpcError) -> status_pb2.Status | None:
    try:
        status = rpc_status.from_call(cast(grpc.Call, error))
    except (AttributeError, TypeError, ValueError, DecodeError):
        # Not a call, or a status trailer that disagrees with the call's own status.
        return None
    return status if isinstance(status, status_pb2.Status) else None
