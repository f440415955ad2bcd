"""A fake OpenAI-compatible embeddings server (stdlib HTTP in a thread, 127.0.0.1, free port).

It answers ``POST {base}/embeddings`` with deterministic vectors (:func:`fake_vector`:
a hashing of words, after a synonym table the test controls maps words to one
concept, so paraphrases that share no word still match by vector). It checks the
request shape (path, bearer key, model, ``input`` a list of strings,
``encoding_format: "float"``) and answers a malformed request 400, records every
request, and can be told to fail (a status, or garbage) or to answer slowly.
Running in its own thread, it serves a server process as well as in-process code.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from contextd.providers.embeddings import EmbeddingError

DIMENSIONS = 64
_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "am", "are", "as", "at", "be", "do", "does", "did", "i", "is", "it"}
    | {"my", "me", "of", "on", "or", "the", "to", "what", "where", "which", "who", "how"}
    | {"in", "with", "without", "for"}
)


def fake_vector(text: str, synonyms: Mapping[str, str] | None = None) -> list[float]:
    """A unit vector of ``text``'s content words, each mapped through ``synonyms`` first."""
    vector = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        concept = (synonyms or {}).get(word, word)
        digest = hashlib.blake2b(concept.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass
class Failure:
    """The next ``count`` requests answer ``status`` (or, with ``garbage``, a 200 that is
    not an embeddings answer)."""

    count: int
    status: int = 500
    garbage: bool = False


@dataclass
class FakeEmbeddings:
    model: str = "fake-embed-1"
    key: str = ""
    base_path: str = "/v1"
    synonyms: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before each answer
    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def fail(self, count: int = 1, status: int = 500, *, garbage: bool = False) -> None:
        with self._lock:
            self.failures.append(Failure(count, status, garbage))

    def texts(self) -> list[str]:
        """Every text embedded so far, in order."""
        with self._lock:
            return [text for request in self.requests for text in request["body"]["input"]]

    def answer(self, path: str, headers: Mapping[str, str], raw: bytes) -> tuple[int, object]:
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}
        with self._lock:
            self.requests.append({"path": path, "headers": dict(headers), "body": body})
            failure = self.failures[0] if self.failures else None
            if failure is not None:
                failure.count -= 1
                if failure.count <= 0:
                    self.failures.pop(0)
        problem = self._problem(path, headers, body)
        if problem:
            return 400, {"error": {"message": problem, "type": "invalid_request_error"}}
        if self.delay:
            time.sleep(self.delay)
        if failure is not None:
            if failure.garbage:
                return 200, {"object": "list", "data": "not a list"}
            return failure.status, {"error": {"message": f"fake failure {failure.status}"}}
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, self.synonyms)}
            for i, text in enumerate(body["input"])
        ]
        usage = {"prompt_tokens": len(data), "total_tokens": len(data)}
        return 200, {"object": "list", "data": data, "model": self.model, "usage": usage}

    def _problem(self, path: str, headers: Mapping[str, str], body: object) -> str:
        if path != f"{self.base_path}/embeddings":
            return f"unexpected path {path}"
        if self.key and headers.get("authorization") != f"Bearer {self.key}":
            return "missing or wrong bearer key"
        if not isinstance(body, dict) or body.get("model") != self.model:
            return "wrong model"
        texts = body.get("input")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return "input is not a list of strings"
        if body.get("encoding_format") != "float":
            return "encoding_format is not float"
        return ""


def _handler(fake: FakeEmbeddings) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, answer = fake.answer(self.path, headers, raw)
            payload = json.dumps(answer).encode()
            with contextlib.suppress(OSError):  # the client gave up waiting
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def fake_embeddings(**options: Any) -> Iterator[FakeEmbeddings]:
    """A FakeEmbeddings serving on a free local port until the block ends."""
    fake = FakeEmbeddings(**options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class InProcessEmbedder:
    """An Embedder with :func:`fake_vector`s, without HTTP: for store and app tests.

    ``failing`` calls fail next (EmbeddingError); ``delay`` seconds pass before each answer.
    """

    model: str = "fake-embed-1"
    synonyms: dict[str, str] = field(default_factory=dict)
    failing: int = 0
    delay: float = 0.0
    refuse: set[str] = field(default_factory=set)  # texts answered "refused" (HTTP 400)
    provider: str = "fake"
    calls: list[tuple[list[str], str]] = field(default_factory=list)

    async def embed(self, texts: Sequence[str], purpose: str) -> list[list[float]]:
        self.calls.append((list(texts), purpose))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.failing > 0:
            self.failing -= 1
            raise EmbeddingError("fake: provider down")
        if self.refuse & set(texts):
            raise EmbeddingError("fake: input refused", refused=True)
        return [fake_vector(text, self.synonyms) for text in texts]

    async def aclose(self) -> None:
        pass
