"""Reading a gRPC error's details."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
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
