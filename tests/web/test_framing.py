"""The gRPC-Web gateway's pieces without a server: framing, text mode, timeouts, CORS."""

from __future__ import annotations

import base64

import grpc
import pytest
from contextd.config import Settings
from contextd.fronts.web import connect, framing
from contextd.fronts.web.cors import CorsPolicy
from contextd.fronts.web.exchange import Outcome
from hypothesis import given
from hypothesis import strategies as st

from tests.support.grpc_web import split_frames


@given(st.lists(st.binary(max_size=300), max_size=6))
def test_frames_round_trip(payloads: list[bytes]) -> None:
    body = b"".join(framing.encode_frame(framing.MESSAGE, p) for p in payloads)
    assert framing.decode_frames(body) == [(framing.MESSAGE, p) for p in payloads]
    assert split_frames(body) == [(0, p) for p in payloads]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"\x00\x00\x00", r"ends inside a frame header \(3 of 5 bytes\)"),
        (b"\x00\x00\x00\x00\x05abc", "frame 1 declares 5 bytes, 3 follow"),
    ],
)
def test_truncated_bodies_are_refused(body: bytes, error: str) -> None:
    with pytest.raises(framing.FramingError, match=error):
        framing.decode_frames(body)


def test_trailers_frame() -> None:
    encoded = framing.encode_trailers([("grpc-status", "0"), ("x-a", "b")])
    assert encoded == b"\x80\x00\x00\x00\x18grpc-status: 0\r\nx-a: b\r\n"


@given(st.lists(st.binary(max_size=50), max_size=8))
def test_text_encoder_pads_only_at_the_end(pieces: list[bytes]) -> None:
    encoder = framing.TextEncoder()
    text = b"".join(encoder.encode(p) for p in pieces) + encoder.flush()
    assert b"=" not in text.rstrip(b"=")
    assert base64.b64decode(text, validate=True) == b"".join(pieces)


@given(st.lists(st.binary(max_size=50), max_size=8))
def test_text_bodies_in_separately_padded_chunks(pieces: list[bytes]) -> None:
    body = b"\r\n".join(base64.b64encode(p) for p in pieces)
    assert framing.decode_text(body) == b"".join(pieces)


@pytest.mark.parametrize("body", [b"abc!", b"a=bc", b"abcde"])
def test_text_bodies_that_are_not_base64(body: bytes) -> None:
    with pytest.raises(framing.FramingError):
        framing.decode_text(body)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("1H", 3600.0), ("2M", 120.0), ("30S", 30.0), ("250m", 0.25), ("5u", 5e-6), ("7n", 7e-9)],
)
def test_grpc_timeout(header: str, seconds: float) -> None:
    assert framing.parse_timeout(header) == pytest.approx(seconds)


@pytest.mark.parametrize("header", ["", "10", "S", "1.5S", "123456789S", "-1S", "1s"])
def test_malformed_grpc_timeout(header: str) -> None:
    with pytest.raises(ValueError, match="grpc-timeout"):
        framing.parse_timeout(header)


def test_grpc_message_percent_encoding() -> None:
    assert framing.percent_encode("plain text: ok") == "plain text: ok"
    assert framing.percent_encode("100% 会") == "100%25 %E4%BC%9A"


def test_cors_policy() -> None:
    policy = CorsPolicy.parse(" https://Addin.example.com/ ,http://localhost:3000")
    assert policy.allows("https://addin.example.com")
    assert policy.allows("http://localhost:3000")
    assert not policy.allows("http://localhost:3001")
    assert not policy.allows("https://addin.example.com.evil.net")
    assert not CorsPolicy.parse("").allows("http://localhost:3000")
    anyone = CorsPolicy.parse("*")
    assert anyone.allows("https://anything.example") and anyone.allows("null")


def test_preflight_allows_custom_x_headers_only() -> None:
    policy = CorsPolicy.parse("http://localhost:3000")
    headers = policy.preflight_headers(
        "http://localhost:3000", "X-Contextd-Trace, cookie, x-grpc-web"
    )
    allowed = headers["Access-Control-Allow-Headers"].split(", ")
    assert "x-contextd-trace" in allowed and "x-grpc-web" in allowed
    assert "cookie" not in allowed and allowed.count("x-grpc-web") == 1


@pytest.mark.parametrize("raw", ["localhost:3000", "https://a.example/path", "ftp://a.example"])
def test_cors_origins_that_are_not_origins(raw: str) -> None:
    with pytest.raises(ValueError, match="is not an origin"):
        CorsPolicy.parse(raw)


def test_web_settings_from_the_environment() -> None:
    assert Settings().web_port == -1 and Settings().cors_origins == ""
    settings = Settings.from_env(
        {"CONTEXTD_WEB_PORT": "8080", "CONTEXTD_WEB_HOST": "0.0.0.0", "CONTEXTD_CORS_ORIGINS": "*"}
    )
    assert (settings.web_port, settings.web_host, settings.cors_origins) == (8080, "0.0.0.0", "*")


def test_connect_error_codes() -> None:
    assert connect._error(Outcome(grpc.StatusCode.CANCELLED, "", [])) == {"code": "canceled"}
    assert connect._error(Outcome(grpc.StatusCode.NOT_FOUND, "gone", [("x-a", "b")])) == {
        "code": "not_found",
        "message": "gone",
    }
