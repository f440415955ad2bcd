"""Python client of contextd: layered system prompts and budget-fitting message lists.

    from contextd_client import ContextClient

    with ContextClient("127.0.0.1:50151") as client:
        result = client.build_messages("Hi", system_prompt="Be brief.", token_budget=1000)

``ContextClient`` is synchronous, ``AsyncContextClient`` the asyncio twin. Messages
go in and come out as plain dicts; every failed call raises ``ContextdError`` (a
response that cannot be decoded: its subclass ``InvalidResponseError``).
``pb`` and ``pb_grpc`` are the generated protobuf and gRPC modules, for advanced use
together with ``client.stub``.
"""

from __future__ import annotations

from ._aio import AsyncContextClient
from ._client import DEFAULT_TARGET, ContextClient, Metadata
from ._convert import MessageLike, OutputFormat, OverflowPolicy
from ._errors import ContextdError, FieldViolation, InvalidResponseError
from ._pb import context_pb2 as pb
from ._pb import context_pb2_grpc as pb_grpc
from ._types import (
    AssembledPrompt,
    BuildReport,
    BuildResult,
    DroppedRange,
    LayerInfo,
    RemovedToolCall,
    TokenCount,
    TokenizerInfo,
    TokenizerList,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TARGET",
    "AssembledPrompt",
    "AsyncContextClient",
    "BuildReport",
    "BuildResult",
    "ContextClient",
    "ContextdError",
    "DroppedRange",
    "FieldViolation",
    "InvalidResponseError",
    "LayerInfo",
    "MessageLike",
    "Metadata",
    "OutputFormat",
    "OverflowPolicy",
    "RemovedToolCall",
    "TokenCount",
    "TokenizerInfo",
    "TokenizerList",
    "__version__",
    "pb",
    "pb_grpc",
]
