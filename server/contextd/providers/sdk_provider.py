"""The providers behind an official SDK (``openai``, ``anthropic``) on one base.

What they share is here: the constructor's parts (the model and address, the retry
policy, the redactor of the key and credential headers), the stream (opened with
retries, its items assembled into events, failures mapped: _sdk.py) and the close. A
provider names only its differences: its SDK's error classes (``sdk``), the JSON body
of a request (``request_body``), the SDK call that opens the stream (``open_stream``)
and what reads the stream's items (``assembler``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import Any, ClassVar, NotRequired, Protocol, TypedDict, Unpack

from contextd.providers._sdk import Assembler, Redactor, RetryPolicy, SdkErrors, stream_events
from contextd.providers.base import ModelEvent, ModelRequest

# The key sent when none is configured: local servers that need none still get a header.
NO_KEY = "no-key"


class SdkOptions(TypedDict):
    """What every SDK-backed provider is configured with besides its model and address."""

    api_key: str
    timeout: NotRequired[float]  # seconds; 60 by default
    max_retries: NotRequired[int]  # 2 by default
    retry_base_delay: NotRequired[float]  # seconds; 0.5 by default
    default_headers: NotRequired[Mapping[str, str] | None]


class _Client(Protocol):
    async def close(self) -> None: ...


class SdkProvider(ABC):
    """Streams one model call through an SDK client (``client``, made by the subclass
    with its own retries off: they are made here, before the stream starts).

    ``timeout`` (seconds, given to the client) bounds connecting and each wait for the
    next piece of the stream, not the whole answer. ``max_retries`` extra attempts are
    made for connection failures, timeouts and 408/409/5xx before the stream starts
    (backoff from ``retry_base_delay``); 429 is never retried here.
    """

    name: str
    sdk: ClassVar[SdkErrors]

    def __init__(self, *, model: str, base_url: str, **options: Unpack[SdkOptions]) -> None:
        self.default_model = model
        self.base_url = base_url
        api_key, headers = options["api_key"], options.get("default_headers")
        self._retry = RetryPolicy(
            max_retries=options.get("max_retries", 2),
            base_delay=options.get("retry_base_delay", 0.5),
        )
        self._redactor = Redactor.for_config(api_key, headers)
        # What the SDK client is made with: its own retries off (made here, see stream).
        self.client_options: dict[str, Any] = {
            "api_key": api_key or NO_KEY,
            "base_url": base_url,
            "timeout": options.get("timeout", 60.0),
            "max_retries": 0,
            "default_headers": dict(headers) if headers else None,
        }

    @property
    @abstractmethod
    def client(self) -> _Client: ...

    @abstractmethod
    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (``stream`` included)."""

    @abstractmethod
    def open_stream(self, body: dict[str, Any]) -> Awaitable[Any]:
        """The SDK call that opens a stream for ``body``."""

    @abstractmethod
    def assembler(self, request: ModelRequest) -> Assembler:
        """What turns the items of ``request``'s stream into events."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.default_model!r})"

    __str__ = __repr__

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        body = self.request_body(request)
        return stream_events(
            lambda: self.open_stream(body),
            self.assembler(request),
            provider=self.name,
            sdk=self.sdk,
            redactor=self._redactor,
            policy=self._retry,
        )

    async def aclose(self) -> None:
        await self.client.close()
