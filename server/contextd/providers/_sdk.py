"""Plumbing shared by the SDK-backed providers: retries, error mapping, key redaction.

Both official SDKs (``openai``, ``anthropic``) come from the same generator and
raise the same family of exceptions; :class:`SdkErrors` names one SDK's classes
so :func:`map_sdk_error` can turn them into :mod:`contextd.providers.errors`.

Error mapping (the same for every SDK-backed provider):

* HTTP 401 / 403 -> ``ProviderAuthError``.
* HTTP 429 -> ``ProviderRateLimited`` at once (no local retry), ``retry_after``
  from ``Retry-After`` (seconds or an HTTP date), else ``retry-after-ms``.
* connection failures, timeouts, HTTP 408 / 409 / 5xx (529 included) ->
  retried ``max_retries`` times with exponential backoff, then
  ``ProviderUnavailable``. A transport failure after the stream started
  (connection reset, truncated chunked body) -> ``ProviderUnavailable``; it is
  not retried, since part of the answer was already delivered.
* any other HTTP 4xx -> ``ProviderBadResponse`` (the request was refused).
* an error the provider sends inside a started stream (Anthropic's
  ``event: error``, an OpenAI-compatible chunk with an ``error`` object):
  ``ProviderRateLimited`` when its type (or numeric ``code``, as vLLM sends)
  names a rate limit / 429, ``ProviderAuthError`` for credentials / 401 / 403,
  ``ProviderBadResponse`` for an invalid request / other 4xx, otherwise
  (``overloaded_error``, ``api_error``, ``server_error``, no type)
  ``ProviderUnavailable``: the provider failed, the same request may well
  succeed later. Never retried: part of the answer may have been delivered.
* data that breaks the documented format (not JSON, wrong shapes, a stream
  that ends cleanly before its final event) -> ``ProviderBadResponse``.

Messages never contain a secret: every text taken from the provider passes
through :meth:`Redactor.clean`, and mapped errors are raised outside the
``except`` block that caught the SDK exception, so neither ``__cause__`` nor
``__context__`` keeps the SDK exception (whose request carries the key header).
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar

from contextd.providers.base import ModelEvent
from contextd.providers.errors import (
    ProviderAuthError,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)

log = logging.getLogger("contextd.providers")

T = TypeVar("T")

_DETAIL_LIMIT = 300
_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11", "h2", "anyio"})
# Header names whose values are credentials, besides the API key itself.
_SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "proxy-authorization"})


class Redactor:
    """Removes configured secrets from any text that may end up in an error."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another one is removed whole.
        found = {s for s in secrets if len(s) >= 4}
        self._secrets = tuple(sorted(found, key=len, reverse=True))

    @classmethod
    def for_config(cls, api_key: str, headers: Mapping[str, str] | None) -> Redactor:
        secrets = [api_key]
        for name, value in (headers or {}).items():
            if name.lower() in _SECRET_HEADERS:
                secrets.append(value)
                token = value.strip().partition(" ")[2]
                if token:  # "Bearer <token>": the token alone too
                    secrets.append(token.strip())
        return cls(secrets)

    def clean(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """One SDK's exception classes (both SDKs use the same names)."""

    base: type[Exception]  # APIError
    status: type[Exception]  # APIStatusError: .status_code, .response, .body
    connection: type[Exception]  # APIConnectionError
    timeout: type[Exception]  # APITimeoutError (a subclass of connection)
    validation: type[Exception]  # APIResponseValidationError

    @classmethod
    def of(cls, sdk: ModuleType) -> SdkErrors:
        """The classes of ``sdk``, the imported SDK package, by their shared names."""
        return cls(
            base=sdk.APIError,
            status=sdk.APIStatusError,
            connection=sdk.APIConnectionError,
            timeout=sdk.APITimeoutError,
            validation=sdk.APIResponseValidationError,
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a request that fails before its stream starts is retried.

    ``max_retries`` extra attempts after the first; the delay before retry n
    (0-based) is ``base_delay * 2**n`` capped at ``max_delay``, less up to 25 %
    jitter. A ``Retry-After`` on a retryable response is obeyed when it is at
    most ``max_delay``; a longer one ends the retries at once.
    """

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0

    def backoff(self, retry: int) -> float:
        delay: float = min(self.base_delay * 2.0**retry, self.max_delay)
        return delay * (1.0 - 0.25 * random.random())


def header(headers: Any, name: str) -> str | None:
    """A header value from an httpx-style headers object, or None."""
    try:
        value = headers.get(name)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``Retry-After`` (delta seconds or HTTP date) or ``retry-after-ms``."""
    raw = header(headers, "retry-after")
    if raw is not None:
        raw = raw.strip()
        try:
            seconds = float(raw)
        except ValueError:
            at = _http_date(raw)
            if at is not None:
                return max(0.0, at - time.time())
        else:
            if seconds >= 0 and seconds == seconds:  # not NaN
                return seconds
    raw_ms = header(headers, "retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            return None
        if ms >= 0:
            return ms / 1000.0
    return None


def _http_date(text: str) -> float | None:
    """An HTTP date as a POSIX timestamp, or None."""
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


def error_type(body: object) -> str:
    """The error's type or code from an error body (``{"error": {"type": ...}}`` and kin)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        for source in (inner, body):
            if isinstance(source, Mapping):
                for key in ("type", "code"):
                    value = source.get(key)
                    if isinstance(value, str) and value and value != "error":
                        return value
    return ""


def error_detail(body: object, fallback: str = "") -> str:
    """A short human message from an error body."""
    message: object = None
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            message = inner.get("message")
        elif isinstance(inner, str):
            message = inner
        if message is None:
            message = body.get("message")
    elif isinstance(body, str):
        message = body
    text = message if isinstance(message, str) and message.strip() else fallback
    text = " ".join(text.split())
    if len(text) > _DETAIL_LIMIT:
        text = text[:_DETAIL_LIMIT] + "…"
    return text


def _error_labels(body: object) -> list[str]:
    """Every string ``type`` and ``code`` of an error body (OpenAI: type "requests", code
    "rate_limit_exceeded")."""
    labels: list[str] = []
    if isinstance(body, Mapping):
        for source in (body.get("error"), body):
            if isinstance(source, Mapping):
                labels += [v for k in ("type", "code") if isinstance(v := source.get(k), str)]
    return labels


def _error_status(body: object) -> int | None:
    """An HTTP-like status some servers put in a stream error (vLLM: ``"code": 400``)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        for source in (inner, body):
            if isinstance(source, Mapping):
                for key in ("code", "status"):
                    value = source.get(key)
                    if isinstance(value, int) and 400 <= value < 600:
                        return value
    return None


def stream_error(provider: str, body: object, redactor: Redactor) -> ProviderError:
    """Maps an error the provider sent inside a started stream (see the module doc)."""
    kind = error_type(body)
    status = _error_status(body)
    detail = redactor.clean(error_detail(body, "error event without a message"))
    message = f"error in the stream ({kind or status or 'untyped'}): {detail}"
    lowered = " ".join(_error_labels(body)).lower().replace("_", "")
    if "ratelimit" in lowered or status == 429:
        return ProviderRateLimited(provider, message)
    auth_words = ("authentication", "permission", "apikey", "unauthorized")
    if any(word in lowered for word in auth_words) or status in (401, 403):
        return ProviderAuthError(provider, message)
    if "invalidrequest" in lowered or "badrequest" in lowered or "notfound" in lowered:
        return ProviderBadResponse(provider, message)
    if status is not None and status < 500 and status not in (408, 409):
        return ProviderBadResponse(provider, message)
    return ProviderUnavailable(provider, message)


def _is_transport_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in _TRANSPORT_MODULES


def map_sdk_error(
    exc: Exception, *, provider: str, sdk: SdkErrors, redactor: Redactor
) -> ProviderError | None:
    """Turns an SDK, transport or parsing exception into a ProviderError (see the module doc).

    None for an exception of no known kind (a bug): the caller re-raises it as it is.
    """
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, sdk.validation):
        return ProviderBadResponse(provider, "the response did not match the API's schema")
    if isinstance(exc, sdk.status):
        status = getattr(exc, "status_code", 0)
        body = getattr(exc, "body", None)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        detail = redactor.clean(error_detail(body, f"HTTP {status}"))
        if isinstance(status, int) and status < 400:
            # The SDK raised for an error event inside a 200 stream.
            return stream_error(provider, body, redactor)
        if status in (401, 403):
            return ProviderAuthError(provider, f"credentials rejected (HTTP {status}): {detail}")
        if status == 429:
            return ProviderRateLimited(
                provider, f"rate limited (HTTP 429): {detail}", parse_retry_after(headers)
            )
        if status in (408, 409) or status >= 500:
            return ProviderUnavailable(provider, f"provider error (HTTP {status}): {detail}")
        return ProviderBadResponse(provider, f"request refused (HTTP {status}): {detail}")
    if isinstance(exc, sdk.timeout):
        return ProviderUnavailable(provider, "timed out waiting for the provider")
    if isinstance(exc, sdk.connection):
        return ProviderUnavailable(provider, "could not reach the provider or lost the connection")
    if isinstance(exc, sdk.base):
        # An error object inside a started stream (OpenAI-compatible servers).
        return stream_error(provider, getattr(exc, "body", None), redactor)
    if _is_transport_error(exc):
        return ProviderUnavailable(
            provider, f"connection lost during the stream ({type(exc).__name__})"
        )
    if isinstance(exc, ValueError | TypeError | KeyError | AttributeError | IndexError):
        # json.JSONDecodeError and pydantic's ValidationError are ValueErrors.
        return ProviderBadResponse(
            provider, f"malformed stream data ({type(exc).__name__}: {_short(exc, redactor)})"
        )
    return None


def _short(exc: BaseException, redactor: Redactor) -> str:
    text = " ".join(redactor.clean(str(exc)).split())
    return text[:_DETAIL_LIMIT]


def retry_hint(exc: Exception, sdk: SdkErrors) -> float | None:
    if isinstance(exc, sdk.status):
        return parse_retry_after(getattr(getattr(exc, "response", None), "headers", None))
    return None


async def open_with_retries(
    open_call: Callable[[], Awaitable[T]],
    *,
    provider: str,
    sdk: SdkErrors,
    redactor: Redactor,
    policy: RetryPolicy,
) -> T:
    """Runs ``open_call`` (which sends the request and returns once headers arrived).

    ``ProviderUnavailable`` failures are retried per ``policy``; every other
    failure is raised at once. The SDK's own retries are off (``max_retries=0``)
    because they would also retry a 429, sleeping out its ``Retry-After``
    inside a user's turn; the host decides about rate limits.
    """
    retry = 0
    while True:
        try:
            return await open_call()
        except Exception as exc:
            mapped = map_sdk_error(exc, provider=provider, sdk=sdk, redactor=redactor)
            if mapped is None:
                raise
            error: ProviderError = mapped
            hint = retry_hint(exc, sdk)
        # Outside the except block: the raised error keeps no reference to the SDK exception.
        if not isinstance(error, ProviderUnavailable) or retry >= policy.max_retries:
            raise error
        if hint is None:
            delay = policy.backoff(retry)
        elif hint <= policy.max_delay:
            delay = hint
        else:
            raise error  # the server asks for a longer wait than a turn should take
        log.warning(
            "provider request failed, retrying",
            extra={
                "provider": provider,
                "retry": retry + 1,
                "delay_s": round(delay, 3),
                "error": str(error),
            },
        )
        retry += 1
        await asyncio.sleep(delay)


def as_json_object(item: object) -> dict[str, Any] | None:
    """A stream item as the JSON object the server sent, or None when it is not one.

    The SDKs build their models without validation; converting back to the wire
    dict lets one parser handle every SDK version and any malformed item.
    """
    if isinstance(item, dict):
        return item
    to_dict = getattr(item, "to_dict", None)
    if callable(to_dict):
        result = to_dict(warnings=False)
        if isinstance(result, dict):
            return result
    return None


def as_text(value: object) -> str:
    """A JSON string field: "" for null/absent; a non-string is malformed data."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {type(value).__name__}")


def as_int(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return int(value)


async def next_events(
    iterator: AsyncIterator[object],
    feed: Callable[[object], list[ModelEvent]],
    *,
    provider: str,
    sdk: SdkErrors,
    redactor: Redactor,
) -> list[ModelEvent] | None:
    """The events of the stream's next item, or None at its end; failures mapped."""
    try:
        item = await anext(iterator)
        return feed(item)
    except StopAsyncIteration:
        return None
    except Exception as exc:
        mapped = map_sdk_error(exc, provider=provider, sdk=sdk, redactor=redactor)
        if mapped is None:
            raise
    # Outside the except block, so the error does not chain the SDK exception.
    raise mapped


class Assembler(Protocol):
    """Turns a provider's stream items into ModelEvents."""

    def feed(self, item: object) -> list[ModelEvent]: ...

    def end(self) -> list[ModelEvent]: ...


async def stream_events(
    open_stream: Callable[[], Awaitable[Any]],
    assembler: Assembler,
    *,
    provider: str,
    sdk: SdkErrors,
    redactor: Redactor,
    policy: RetryPolicy,
) -> AsyncGenerator[ModelEvent, None]:
    """Open an SDK stream (with retries) and yield its events, failures mapped.

    ``async with`` closes the HTTP response however this generator ends: at the end,
    on an error, on aclose() or on cancellation.
    """
    sdk_stream = await open_with_retries(
        open_stream, provider=provider, sdk=sdk, redactor=redactor, policy=policy
    )
    async with sdk_stream:
        items = aiter(sdk_stream)
        while (
            events := await next_events(
                items, assembler.feed, provider=provider, sdk=sdk, redactor=redactor
            )
        ) is not None:
            for event in events:
                yield event
        for event in assembler.end():
            yield event
