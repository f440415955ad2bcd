"""Python client of contextd: layered system prompts, budget-fitting message lists, chat.

    from contextd_client import ContextClient

    with ContextClient("127.0.0.1:50151") as client:
        result = client.build_messages("Hi", system_prompt="Be brief.", token_budget=1000)
        for event in client.stream_chat("Hi", user_id="ada"):
            ...

``ContextClient`` is synchronous, ``AsyncContextClient`` the asyncio twin. Messages
go in and come out as plain dicts; every failed call raises a subclass of
``ContextdError``, one per status code (``NotFoundError``, ``InvalidArgumentError``,
``UnavailableError``, ...; ``StatusCode`` names the codes without grpc; a response that
cannot be decoded: ``InvalidResponseError``).
``pb`` and ``pb_grpc`` are the generated protobuf and gRPC modules, for advanced use
together with ``client.stub``; ``cpb``/``cpb_grpc`` (chat), ``spb``/``spb_grpc``
(sessions), ``mpb``/``mpb_grpc`` (memories), ``ppb``/``ppb_grpc`` (prompts) and
``upb``/``upb_grpc`` (users) go with ``client.chat_stub``, ``client.session_stub``,
``client.memory_stub``, ``client.prompt_stub`` and ``client.user_stub``.
"""

from __future__ import annotations

from ._aio import AsyncContextClient
from ._chat import AsyncChatStream, ChatStream
from ._chat_calls import ToolLike, ToolProtocol, ToolResultLike
from ._client import ContextClient
from ._context_calls import CacheLayout, OutputFormat, OverflowPolicy
from ._credentials import AsyncTokenProvider, TokenProvider
from ._errors import (
    ERROR_CLASSES,
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    ContextdError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    InvalidResponseError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StatusCode,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from ._messages import MessageLike
from ._options import DEFAULT_TARGET, Metadata
from ._parts import PartLike, image_part
from ._pb import chat_pb2 as cpb
from ._pb import chat_pb2_grpc as cpb_grpc
from ._pb import context_pb2 as pb
from ._pb import context_pb2_grpc as pb_grpc
from ._pb import memory_pb2 as mpb
from ._pb import memory_pb2_grpc as mpb_grpc
from ._pb import prompts_pb2 as ppb
from ._pb import prompts_pb2_grpc as ppb_grpc
from ._pb import sessions_pb2 as spb
from ._pb import sessions_pb2_grpc as spb_grpc
from ._pb import users_pb2 as upb
from ._pb import users_pb2_grpc as upb_grpc
from ._record_types import (
    AddedMemory,
    Collected,
    DeletedCounts,
    EventType,
    Memory,
    MemoryChange,
    MemoryFilter,
    MemoryHits,
    Message,
    MessageStatus,
    MessageToolCall,
    Role,
    ScoredMemory,
    ScoreParts,
    Session,
    SessionEvent,
    Skill,
    StoredMessage,
    Template,
)
from ._retry import RetryPolicy
from ._types import (
    TURN_STATUSES,
    AssembledPrompt,
    BuildReport,
    BuildResult,
    ChatEvent,
    ContextLayerInfo,
    DroppedRange,
    LayerInfo,
    MessageEdit,
    MovedToolResult,
    RemovedToolCall,
    TextDelta,
    TokenCount,
    TokenizerInfo,
    TokenizerList,
    TokenUsage,
    ToolCallEvent,
    TurnCompleted,
    TurnStarted,
    TurnStatus,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TARGET",
    "ERROR_CLASSES",
    "TURN_STATUSES",
    "AbortedError",
    "AddedMemory",
    "AlreadyExistsError",
    "AssembledPrompt",
    "AsyncChatStream",
    "AsyncContextClient",
    "AsyncTokenProvider",
    "BuildReport",
    "BuildResult",
    "CacheLayout",
    "CancelledError",
    "ChatEvent",
    "ChatStream",
    "Collected",
    "ContextClient",
    "ContextLayerInfo",
    "ContextdError",
    "DataLossError",
    "DeadlineExceededError",
    "DeletedCounts",
    "DroppedRange",
    "EventType",
    "FailedPreconditionError",
    "FieldViolation",
    "InternalError",
    "InvalidArgumentError",
    "InvalidResponseError",
    "LayerInfo",
    "Memory",
    "MemoryChange",
    "MemoryFilter",
    "MemoryHits",
    "Message",
    "MessageEdit",
    "MessageLike",
    "MessageStatus",
    "MessageToolCall",
    "Metadata",
    "MovedToolResult",
    "NotFoundError",
    "OutOfRangeError",
    "OutputFormat",
    "OverflowPolicy",
    "PartLike",
    "PermissionDeniedError",
    "RemovedToolCall",
    "ResourceExhaustedError",
    "RetryPolicy",
    "Role",
    "ScoreParts",
    "ScoredMemory",
    "Session",
    "SessionEvent",
    "Skill",
    "StatusCode",
    "StoredMessage",
    "Template",
    "TextDelta",
    "TokenCount",
    "TokenProvider",
    "TokenUsage",
    "TokenizerInfo",
    "TokenizerList",
    "ToolCallEvent",
    "ToolLike",
    "ToolProtocol",
    "ToolResultLike",
    "TurnCompleted",
    "TurnStarted",
    "TurnStatus",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "Usage",
    "__version__",
    "cpb",
    "cpb_grpc",
    "image_part",
    "mpb",
    "mpb_grpc",
    "pb",
    "pb_grpc",
    "ppb",
    "ppb_grpc",
    "spb",
    "spb_grpc",
    "upb",
    "upb_grpc",
]
