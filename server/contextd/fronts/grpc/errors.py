"""Domain errors -> gRPC status with google.rpc details.

A status goes back in trailers: the message in ``grpc-message`` (percent-encoded, so up
to three times its UTF-8 length) and the details in ``grpc-status-details-bin`` (base64).
grpc's clients refuse more than 8 KiB of metadata by default and then report
RESOURCE_EXHAUSTED instead of the answer, so every status is bounded here, whatever its
error holds: the message to ``MAX_MESSAGE_BYTES``, the details to about
``MAX_DETAIL_BYTES``. A request with more bad fields than fit gets the first ones and a
count of the rest.
"""

from __future__ import annotations

import grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from contextd.core.errors import (
    ContextdError,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

MAX_MESSAGE_BYTES = 1024
MAX_DETAIL_BYTES = 1536
# One violation's field path and description (ours, but paths name map keys a caller sent).
_MAX_FIELD_BYTES = 160
_MAX_DESCRIPTION_BYTES = 320


def status_for(error: ContextdError) -> grpc.Status:
    """The status a caller sees for a domain error, with machine-readable details."""
    if isinstance(error, InvalidArgument):
        return _bad_request(error.violations)
    message = bounded(str(error), MAX_MESSAGE_BYTES)
    if isinstance(error, FailedPrecondition):
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=type(error).__name__,
                    description=bounded(str(error), _MAX_DESCRIPTION_BYTES),
                )
            ]
        )
        return _status(code_pb2.FAILED_PRECONDITION, message, failure)
    if isinstance(error, NotFound):
        return _status(code_pb2.NOT_FOUND, message, None)
    if isinstance(error, PermissionDenied):
        return _status(code_pb2.PERMISSION_DENIED, message, None)
    if isinstance(error, Unauthenticated):
        return _status(code_pb2.UNAUTHENTICATED, message, None)
    if isinstance(error, ResourceExhausted):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(max(1, round(error.retry_after_s * 1e9)))
        return _status(code_pb2.RESOURCE_EXHAUSTED, message, retry)
    if isinstance(error, Unavailable):
        return _status(code_pb2.UNAVAILABLE, message, None)
    return _status(code_pb2.INTERNAL, message, None)


def _bad_request(violations: tuple[FieldViolation, ...]) -> grpc.Status:
    """INVALID_ARGUMENT naming the bad fields, as many as fit (every one, as a rule)."""
    detail = error_details_pb2.BadRequest()
    texts: list[str] = []
    spent = 0
    for v in violations:
        field = bounded(v.field, _MAX_FIELD_BYTES)
        description = bounded(v.description, _MAX_DESCRIPTION_BYTES)
        size = len(field.encode()) + len(description.encode()) + 8  # the wire's framing
        if spent + size > MAX_DETAIL_BYTES and texts:
            break
        spent += size
        detail.field_violations.add(field=field, description=description)
        texts.append(f"{field}: {description}")
    left = len(violations) - len(texts)
    message = "; ".join(texts) + (f"; and {left} more" if left else "")
    if len(message.encode()) > MAX_MESSAGE_BYTES:
        # The count of the rest is what a reader needs most: it stays.
        tail = f"; ... ({len(violations)} bad fields in all)"
        message = bounded(message, MAX_MESSAGE_BYTES - len(tail.encode())) + tail
    return _status(code_pb2.INVALID_ARGUMENT, message, detail)


def bounded(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8 (a cut one ends with "…")."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", "ignore") + "…"


def _status(code: int, message: str, detail: object | None) -> grpc.Status:
    status = status_pb2.Status(code=code, message=message)
    if detail is not None:
        status.details.add().Pack(detail)
    return rpc_status.to_status(status)
