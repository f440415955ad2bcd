"""Domain errors -> gRPC status with google.rpc details."""

from __future__ import annotations

import grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from contextd.core.errors import (
    ContextdError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)


def status_for(error: ContextdError) -> grpc.Status:
    """The status a caller sees for a domain error, with machine-readable details."""
    if isinstance(error, InvalidArgument):
        detail = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description
                )
                for v in error.violations
            ]
        )
        return _status(code_pb2.INVALID_ARGUMENT, str(error), detail)
    if isinstance(error, FailedPrecondition):
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=type(error).__name__, description=str(error)
                )
            ]
        )
        return _status(code_pb2.FAILED_PRECONDITION, str(error), failure)
    if isinstance(error, NotFound):
        return _status(code_pb2.NOT_FOUND, str(error), None)
    if isinstance(error, PermissionDenied):
        return _status(code_pb2.PERMISSION_DENIED, str(error), None)
    if isinstance(error, Unauthenticated):
        return _status(code_pb2.UNAUTHENTICATED, str(error), None)
    if isinstance(error, ResourceExhausted):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(max(1, round(error.retry_after_s * 1e9)))
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(error), retry)
    if isinstance(error, Unavailable):
        return _status(code_pb2.UNAVAILABLE, str(error), None)
    return _status(code_pb2.INTERNAL, str(error), None)


def _status(code: int, message: str, detail: object | None) -> grpc.Status:
    status = status_pb2.Status(code=code, message=message)
    if detail is not None:
        status.details.add().Pack(detail)
    return rpc_status.to_status(status)
