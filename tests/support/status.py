"""Reading a gRPC error's details."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


def violations(error: grpc.RpcError) -> list[str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    fields: list[str] = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields += [v.field for v in bad.field_violations]
    return fields


def retry_delay(status: status_pb2.Status) -> float:
    """Seconds of the status's RetryInfo detail (which it must have)."""
    for detail in status.details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.ToNanoseconds() / 1e9
    raise AssertionError(f"no RetryInfo in {status}")


def status_of(error: grpc.RpcError) -> status_pb2.Status:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    return status


def violation_details(error: grpc.RpcError) -> list[tuple[str, str]]:
    """The error's field violations as (field, description)."""
    status = status_of(error)
    found: list[tuple[str, str]] = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            found += [(v.field, v.description) for v in bad.field_violations]
    return found
