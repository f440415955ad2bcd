"""Type aliases for grpc's classes, generic only in the type stubs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import grpc
import grpc.aio

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
else:
    Context = grpc.aio.ServicerContext
    Handler = grpc.RpcMethodHandler
