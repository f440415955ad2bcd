"""Hostile HTTP requests for the fuzz tests of the web port, /v1 and MCP: bodies nested
far deeper than any parser should follow, oversized strings, wrong types; and the
checks every answer must pass (no 5xx of the server's own, no long echo of a value
sent)."""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz import JSON_VALUES

# An echoed value is cut to its first 40 characters (docs/errors.md): an answer holding
# this many of a value's characters in a row quotes more than that.
ECHO_RUN = 60
LONG = "y" * 20_000


def nested(depth: int, inner: str = "1") -> str:
    """JSON text of ``depth`` lists around ``inner``: read recursively, it overflows."""
    return "[" * depth + inner + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# Bodies no parser may follow to the end, or that are far larger than any valid value.
DEEP_JSON = st.sampled_from(
    [
        nested(100_000),
        deep_object(50_000),
        nested(65),
        "[" * 200_000,  # never closed
        json.dumps({"s": LONG, LONG: 1}),
        json.dumps([LONG] * 5),
    ]
)
BODIES = (
    st.binary(max_size=200)
    | JSON_VALUES.map(lambda v: json.dumps(v).encode())
    | DEEP_JSON.map(str.encode)
)


def in_place(shape: Mapping[str, Any], key: str, raw: str) -> bytes:
    """``shape`` as JSON with ``key``'s value replaced by the JSON text ``raw`` (a value
    json.dumps could not write: nested too deep for it)."""
    marker = "__fuzz_marker__"
    text = json.dumps({**shape, key: marker})
    return text.replace(json.dumps(marker), raw, 1).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def text(self) -> str:
        """The body and the header values, JSON strings read (so that an escaped echo
        counts), for the echo check."""
        parts = [self.body.decode("utf-8", "replace"), *self.headers.values()]
        with contextlib.suppress(ValueError, RecursionError):
            parts += list(_strings(json.loads(self.body)))
        return "\n".join(parts)


def send(address: str, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Answer:
    """One request on a connection of its own; header values go as UTF-8 bytes, as a
    client that does not check them would send them."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value.encode())
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = b"" if method == "HEAD" else response.read()
        return Answer(response.status, dict(response.getheaders()), data)
    finally:
        connection.close()


def sent_strings(path: str, body: bytes, headers: Mapping[str, str]) -> Iterator[str]:
    """The values of a request an answer could echo: the path, the header values, and
    every key and string of a JSON body."""
    yield path
    yield from headers.values()
    try:
        yield from _strings(json.loads(body))
    except (ValueError, RecursionError):
        yield body.decode("utf-8", "replace")


def assert_no_long_echo(answer: Answer, sent: Iterator[str]) -> None:
    """No run of ``ECHO_RUN`` characters of a value sent appears in the answer."""
    text = answer.text()
    for value in sent:
        if len(value) <= ECHO_RUN:
            continue
        for start in (0, len(value) // 2, len(value) - ECHO_RUN):
            piece = value[start : start + ECHO_RUN]
            assert piece not in text, f"{answer.status} echoes {piece!r}: {text[:300]!r}"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
