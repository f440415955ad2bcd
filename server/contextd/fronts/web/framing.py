"""The gRPC-Web wire format: length-prefixed frames, the trailer frame, base64 text mode.

A frame is one flag byte, a 4-byte big-endian length and the payload. Messages carry
flag 0x00; the status at the end of a response travels in a frame flagged 0x80 whose
payload is HTTP/1-style ``name: value`` lines. Connect's streaming envelopes share the
layout (its end of stream is flag 0x02), so both protocols read requests here.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterable

import grpc

from contextd.core.errors import shown
from contextd.fronts.web.exchange import CallError

MESSAGE = 0x00
COMPRESSED = 0x01
TRAILERS = 0x80

_PREFIX = struct.Struct(">BI")
PREFIX_SIZE = _PREFIX.size

# Base64 as it arrives in text mode: clients may concatenate separately encoded chunks,
# so padding can end any 4-character group, not only the last.
_TEXT_CHUNK = re.compile(rb"[A-Za-z0-9+/]*={0,2}")
_TIMEOUT = re.compile(r"([0-9]{1,8})([HMSmun])")
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


class FramingError(ValueError):
    """A request body that is not a sequence of whole frames."""


def encode_frame(flags: int, payload: bytes) -> bytes:
    return _PREFIX.pack(flags, len(payload)) + payload


def decode_frames(body: bytes) -> list[tuple[int, bytes]]:
    """Every ``(flags, payload)`` in ``body``, which must end on a frame boundary."""
    frames: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(body):
        if len(body) - offset < PREFIX_SIZE:
            raise FramingError(
                f"the body ends inside a frame header ({len(body) - offset} of {PREFIX_SIZE} bytes)"
            )
        flags, length = _PREFIX.unpack_from(body, offset)
        offset += PREFIX_SIZE
        if len(body) - offset < length:
            raise FramingError(
                f"frame {len(frames) + 1} declares {length} bytes, {len(body) - offset} follow"
            )
        frames.append((flags, body[offset : offset + length]))
        offset += length
    return frames


def request_messages(body: bytes, protocol: str, *, text: bool = False) -> list[bytes]:
    """The messages of a framed request body in ``protocol`` (gRPC-Web, base64 first if
    ``text``, or Connect streaming): whole frames, every one flagged 0x00.

    Anything else is the client's mistake and refused as INVALID_ARGUMENT, saying what
    is wrong. A compressed frame counts: neither protocol lets a frame be compressed
    unless the request declares an encoding, and none is accepted here.
    """
    try:
        frames = decode_frames(decode_text(body) if text else body)
    except FramingError as error:
        raise CallError(
            grpc.StatusCode.INVALID_ARGUMENT, f"malformed {protocol} request: {error}"
        ) from None
    for number, (flags, _) in enumerate(frames, start=1):
        if flags != MESSAGE:
            problem = (
                "compressed, but no request compression is supported"
                if flags & COMPRESSED
                else "request frames must have flags 0x00"
            )
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"malformed {protocol} request: frame {number} has flags 0x{flags:02x}: {problem}",
            )
    return [payload for _, payload in frames]


def encode_trailers(trailers: Iterable[tuple[str, str]]) -> bytes:
    block = "".join(f"{name}: {value}\r\n" for name, value in trailers)
    return encode_frame(TRAILERS, block.encode("ascii"))


def decode_text(body: bytes | bytearray) -> bytes:
    """The bytes behind a ``grpc-web-text`` body (base64, possibly in padded chunks)."""
    compact = b"".join(body.split())
    decoded = bytearray()
    position = 0
    while position < len(compact):
        match = _TEXT_CHUNK.match(compact, position)
        assert match is not None  # the pattern matches the empty string
        chunk = match.group()
        if not chunk:
            raise FramingError("a grpc-web-text body must be base64")
        try:
            decoded += base64.b64decode(chunk, validate=True)
        except binascii.Error as error:
            raise FramingError(f"a grpc-web-text body must be base64: {error}") from None
        position = match.end()
    return bytes(decoded)


class TextEncoder:
    """Base64 for a response streamed in pieces, padded only at the very end (some
    clients decode the stream as one base64 text)."""

    def __init__(self) -> None:
        self._pending = b""

    def encode(self, data: bytes) -> bytes:
        data = self._pending + data
        whole = len(data) - len(data) % 3
        self._pending = data[whole:]
        return base64.b64encode(data[:whole])

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return base64.b64encode(rest)


def parse_timeout(value: str) -> float:
    """Seconds in a ``grpc-timeout`` header such as ``250m`` or ``30S``."""
    match = _TIMEOUT.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"malformed grpc-timeout {shown(value)}")
    return int(match.group(1)) * _TIMEOUT_UNITS[match.group(2)]


def percent_encode(message: str) -> str:
    """``grpc-message`` as the gRPC spec writes it: printable ASCII except '%' as is,
    every other UTF-8 byte as %XX."""
    return "".join(
        chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in message.encode()
    )
