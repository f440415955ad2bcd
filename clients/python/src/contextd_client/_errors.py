"""gRPC errors -> ContextdError and its subclass per status code, with the
google.rpc.BadRequest field violations decoded."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


class StatusCode(enum.IntEnum):
    """The gRPC status codes, named and numbered as gRPC does, so that callers need not
    import grpc: ``StatusCode.NOT_FOUND == 5``, ``StatusCode(error.code.value[0])``."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return _GRPC_CODES[self.value]


_GRPC_CODES: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad request field, named as in the proto request, e.g. ``history[0].role``."""

    field: str
    description: str


class ContextdError(Exception):
    """A failed contextd call; a failed call raises the subclass of its status code
    (:class:`NotFoundError`, :class:`InvalidArgumentError`, ...; see ``ERROR_CLASSES``).

    ``status_code`` is the status as this package's :class:`StatusCode`; ``code`` the
    same status as a ``grpc.StatusCode`` (both are given to the constructor as
    either). ``message`` is the server's message, and ``violations`` the field
    violations of an INVALID_ARGUMENT error (empty for other codes). ``status`` is the
    full ``google.rpc.Status`` when the server sent one. The original
    ``grpc.RpcError`` is the exception's ``__cause__``.
    """

    code: grpc.StatusCode
    status_code: StatusCode
    message: str
    violations: list[FieldViolation]
    status: status_pb2.Status | None

    def __init__(
        self,
        code: grpc.StatusCode | StatusCode,
        message: str,
        violations: Iterable[FieldViolation] = (),
        status: status_pb2.Status | None = None,
    ) -> None:
        status_code = code if isinstance(code, StatusCode) else StatusCode(code.value[0])
        super().__init__(f"{status_code.name}: {message}")
        self.code = status_code.grpc_code
        self.status_code = status_code
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
        return error_class(code)(code, message, violations, status)


class CancelledError(ContextdError):
    """CANCELLED: the call was cancelled, most often by this client."""


class UnknownError(ContextdError):
    """UNKNOWN: a failure the server or gRPC could not classify."""


class InvalidArgumentError(ContextdError):
    """INVALID_ARGUMENT: the request is malformed; ``field_violations`` name the fields."""

    @property
    def field_violations(self) -> list[FieldViolation]:
        return self.violations


class DeadlineExceededError(ContextdError):
    """DEADLINE_EXCEEDED: the call's timeout passed before it finished."""


class NotFoundError(ContextdError):
    """NOT_FOUND: the session, message, memory, template or skill does not exist."""


class AlreadyExistsError(ContextdError):
    """ALREADY_EXISTS: what the call creates is there already."""


class PermissionDeniedError(ContextdError):
    """PERMISSION_DENIED: the caller may not touch this user's data."""


class ResourceExhaustedError(ContextdError):
    """RESOURCE_EXHAUSTED: a quota or size limit was reached."""


class FailedPreconditionError(ContextdError):
    """FAILED_PRECONDITION: the request is valid but cannot run in the current state."""


class AbortedError(ContextdError):
    """ABORTED: the call was aborted, e.g. by a concurrent change."""


class OutOfRangeError(ContextdError):
    """OUT_OF_RANGE: a value is past the valid range."""


class UnimplementedError(ContextdError):
    """UNIMPLEMENTED: the server does not offer this call."""


class InternalError(ContextdError):
    """INTERNAL: the server failed, or its response could not be decoded."""


class UnavailableError(ContextdError):
    """UNAVAILABLE: the server cannot be reached or is shutting down; a retry may succeed."""


class DataLossError(ContextdError):
    """DATA_LOSS: unrecoverable data loss or corruption."""


class UnauthenticatedError(ContextdError):
    """UNAUTHENTICATED: the call carries no valid credential."""


#: The class raised for each status code (OK has none: it is never an error).
ERROR_CLASSES: dict[StatusCode, type[ContextdError]] = {
    StatusCode.CANCELLED: CancelledError,
    StatusCode.UNKNOWN: UnknownError,
    StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    StatusCode.NOT_FOUND: NotFoundError,
    StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    StatusCode.ABORTED: AbortedError,
    StatusCode.OUT_OF_RANGE: OutOfRangeError,
    StatusCode.UNIMPLEMENTED: UnimplementedError,
    StatusCode.INTERNAL: InternalError,
    StatusCode.UNAVAILABLE: UnavailableError,
    StatusCode.DATA_LOSS: DataLossError,
    StatusCode.UNAUTHENTICATED: UnauthenticatedError,
}


def error_class(code: grpc.StatusCode | StatusCode) -> type[ContextdError]:
    """The ContextdError subclass raised for ``code`` (ContextdError itself for OK)."""
    status_code = code if isinstance(code, StatusCode) else StatusCode(code.value[0])
    return ERROR_CLASSES.get(status_code, ContextdError)


class InvalidResponseError(InternalError, ValueError):
    """The call succeeded but its response cannot be decoded.

    Raised when ``BuildMessagesResponse.payload_json`` is not a JSON object. ``code``
    is INTERNAL, as gRPC reports a response it cannot deserialize; ``status`` is
    ``None`` and ``violations`` empty. The decoding error, if any, is ``__cause__``.
    Being an ``InternalError`` and a ``ValueError``, it is caught as either.
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
