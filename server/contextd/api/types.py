"""Type aliases for grpc's generic classes."""

from typing import Any

import grpc
import grpc.aio

Context = grpc.aio.ServicerContext[Any, Any]
Handler = grpc.RpcMethodHandler[Any, Any]
