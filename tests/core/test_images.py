"""Image parts: header reading, the counting rules with known figures, validation."""

from __future__ import annotations

import pytest
from contextd.core.content import (
    ImageDetail,
    ImageLimits,
    ImagePart,
    TextPart,
    checked_parts,
    parts_text,
)
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.image_header import image_size, sniff_media_type
from contextd.core.image_tokens import anthropic_image_tokens, image_tokens, openai_image_tokens
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import EstimateTokenizer, TokenizerRegistry, message_tokens

from tests.support import images


@pytest.mark.parametrize(
    ("data", "media_type", "size"),
    [
        (images.png(640, 480), "image/png", (640, 480)),
        (images.gif(17, 9), "image/gif", (17, 9)),
        (images.jpeg(1024, 768), "image/jpeg", (1024, 768)),
        (images.webp_lossless(300, 200), "image/webp", (300, 200)),
        (images.webp_lossy(64, 48), "image/webp", (64, 48)),
        (images.webp_extended(4000, 3000), "image/webp", (4000, 3000)),
    ],
)
def test_header_gives_type_and_size(data: bytes, media_type: str, size: tuple[int, int]) -> None:
    assert sniff_media_type(data) == media_type
    assert image_size(data) == size


@pytest.mark.parametrize(
    "data", [b"", b"hello", images.png()[:20], b"\xff\xd8\xff\xe0\x00", b"RIFF\0\0\0\0WEBPVP8Z"]
)
def test_unreadable_headers(data: bytes) -> None:
    assert image_size(data) is None


def test_openai_tile_rule_known_figures() -> None:
    # OpenAI's published examples.
    assert openai_image_tokens(1024, 1024, ImageDetail.HIGH) == 765
    assert openai_image_tokens(2048, 4096, ImageDetail.HIGH) == 1105
    assert openai_image_tokens(4096, 8192, ImageDetail.LOW) == 85
    assert openai_image_tokens(100, 100, ImageDetail.AUTO) == 255  # one tile, no upscaling


def test_anthropic_rule_known_figures() -> None:
    assert anthropic_image_tokens(1092, 1092) == 1590  # Anthropic's 1092x1092 example
    assert anthropic_image_tokens(200, 200) == 54
    # A long edge over 1568 is scaled down first: 3136x1568 counts as 1568x784.
    assert anthropic_image_tokens(3136, 1568) == anthropic_image_tokens(1568, 784) == 1640


def test_unknown_size_counts_as_1024_square() -> None:
    url = ImagePart(url="https://example.com/a.png")
    assert image_tokens(url, openai_rule=True) == 765
    assert image_tokens(url, openai_rule=False) == 1399
    low = ImagePart(url="https://example.com/a.png", detail=ImageDetail.LOW)
    assert image_tokens(low, openai_rule=True) == 85


def test_message_tokens_count_texts_and_images() -> None:
    tik = TokenizerRegistry().get("cl100k_base")
    image = ImagePart(data=images.png(), media_type="image/png", width=1024, height=1024)
    parts = (TextPart("hello"), image)
    message = ChatMessage(Role.USER, parts_text(parts), parts=parts)
    assert message_tokens(message, tik) == 3 + tik.count("hello") + 765
    estimate = EstimateTokenizer()
    assert message_tokens(message, estimate) == 2 + 1399


def test_text_view_has_placeholders_never_bytes() -> None:
    parts = (
        TextPart("What is this?"),
        ImagePart(data=images.png(640, 480), media_type="image/png", width=640, height=480),
        ImagePart(url="https://example.com/secret?sig=abc"),
    )
    assert parts_text(parts) == "What is this?\n[image: image/png 640x480]\n[image: url]"


DEFAULT_LIMITS = ImageLimits()


def _check(*parts: TextPart | ImagePart, limits: ImageLimits = DEFAULT_LIMITS) -> list[str]:
    v = Violations()
    checked_parts(parts, "history[3].parts", limits, v)
    try:
        v.raise_if_any()
    except InvalidArgument as error:
        return [f"{x.field}: {x.description}" for x in error.violations]
    return []


def test_inline_image_gets_its_size() -> None:
    v = Violations()
    [part] = checked_parts(
        [ImagePart(data=images.jpeg(30, 20), media_type="image/jpeg")], "p", ImageLimits(), v
    )
    assert not v and isinstance(part, ImagePart) and (part.width, part.height) == (30, 20)


def test_validation_names_each_bad_part() -> None:
    errors = _check(
        ImagePart(data=images.png(), media_type="image/jpeg"),
        ImagePart(data=images.png(), media_type="image/bmp"),
        ImagePart(data=b"", media_type="image/png"),
        ImagePart(url="http://example.com/a.png"),
        ImagePart(url="data:image/png;base64,AAAA"),
        ImagePart(url="https://example.com/a.png", width=10),
    )
    fields = [e.split(":")[0] for e in errors]
    assert fields == [
        "history[3].parts[0].image.data",
        "history[3].parts[1].image.media_type",
        "history[3].parts[2].image.data",
        "history[3].parts[3].image.url",
        "history[3].parts[4].image.url",
        "history[3].parts[5].image.width",
    ]
    assert "image/png, not image/jpeg" in errors[0]


def test_size_limit_and_part_count() -> None:
    data = images.png(64, 64)
    errors = _check(
        ImagePart(data=data, media_type="image/png"), limits=ImageLimits(max_image_bytes=10)
    )
    assert errors == [
        f"history[3].parts[0].image.data: {len(data)} bytes is over the limit of 10 an image"
    ]
    many = [TextPart("x")] * 3
    assert _check(*many, limits=ImageLimits(max_parts=2)) == [
        "history[3].parts: at most 2 parts a message"
    ]
    assert _check(TextPart(" ")) == ["history[3].parts: parts must hold an image or some text"]
