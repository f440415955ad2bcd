"""Message content as parts: text, and images by https URL or by inline bytes.

A message with parts keeps, as its ``content``, a text view of them: the texts and a
short placeholder per image (``[image: image/png 640x480]``), one part a line. Whatever
reads messages as text (memory extraction, summaries, the event log, the XML history,
search) reads that view and never the bytes; token counting, the provider formats and
the store read the parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from contextd.core.errors import Violations
from contextd.core.image_header import image_size, sniff_media_type

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
# Anthropic takes at most 100 images a request; text parts are as many again.
MAX_PARTS = 200
MAX_URL_LENGTH = 8192


class ImageDetail(StrEnum):
    AUTO = "auto"
    LOW = "low"
    HIGH = "high"


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image by ``url`` or by ``data`` (with its ``media_type``); width and height are
    0 when unknown (a URL image whose size the caller did not give)."""

    url: str = ""
    data: bytes = b""
    media_type: str = ""
    detail: ImageDetail = ImageDetail.AUTO
    width: int = 0
    height: int = 0


ContentPart = TextPart | ImagePart


def image_placeholder(image: ImagePart) -> str:
    """How an image reads in text: kind and size, never the bytes or the URL (which may
    carry a signature)."""
    kind = image.media_type or "url"
    if image.width and image.height:
        return f"[image: {kind} {image.width}x{image.height}]"
    return f"[image: {kind}]"


def parts_text(parts: Sequence[ContentPart]) -> str:
    """The text view of ``parts`` (see the module docstring)."""
    return "\n".join(
        p.text if isinstance(p, TextPart) else image_placeholder(p)
        for p in parts
        if not isinstance(p, TextPart) or p.text
    )


@dataclass(frozen=True, slots=True)
class ImageLimits:
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES
    max_parts: int = MAX_PARTS


def checked_parts(
    parts: Sequence[ContentPart], at: str, limits: ImageLimits, violations: Violations
) -> tuple[ContentPart, ...]:
    """The parts with each inline image's size read from its header; every bad part is
    recorded (``at`` is the parts field, e.g. ``history[3].parts``)."""
    if len(parts) > limits.max_parts:
        violations.add(at, f"at most {limits.max_parts} parts a message")
    out: list[ContentPart] = []
    for i, part in enumerate(parts):
        if isinstance(part, ImagePart):
            part = _checked_image(part, f"{at}[{i}].image", limits, violations)
        out.append(part)
    if not any(isinstance(p, ImagePart) or p.text.strip() for p in out):
        violations.add(at, "parts must hold an image or some text")
    return tuple(out)


def _checked_image(
    image: ImagePart, at: str, limits: ImageLimits, violations: Violations
) -> ImagePart:
    if image.url:
        _check_url(image, at, violations)
        return image
    if not image.data:
        violations.add(f"{at}.data", "an image needs a url or non-empty data")
        return image
    if image.media_type not in MEDIA_TYPES:
        violations.add(f"{at}.media_type", f"use one of {', '.join(MEDIA_TYPES)}")
    elif sniff_media_type(image.data) != image.media_type:
        found = sniff_media_type(image.data) or "not an image of the four types"
        violations.add(f"{at}.data", f"the bytes are {found}, not {image.media_type}")
    if len(image.data) > limits.max_image_bytes:
        violations.add(
            f"{at}.data",
            f"{len(image.data)} bytes is over the limit of {limits.max_image_bytes} an image",
        )
    size = image_size(image.data)
    if size is None:
        violations.add(f"{at}.data", "the image's size cannot be read from its header")
        return image
    return ImagePart(
        data=image.data,
        media_type=image.media_type,
        detail=image.detail,
        width=size[0],
        height=size[1],
    )


def _check_url(image: ImagePart, at: str, violations: Violations) -> None:
    url = image.url
    if url.startswith("data:"):
        violations.add(f"{at}.url", "give inline images as data with a media_type, not a data: URL")
    elif not url.startswith("https://") or len(url) <= len("https://"):
        violations.add(f"{at}.url", "an image URL must be https")
    elif len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        violations.add(f"{at}.url", f"at most {MAX_URL_LENGTH} characters, no spaces")
    if image.media_type:
        violations.add(f"{at}.media_type", "only with data: a URL image's type is the server's")
    if (image.width > 0) != (image.height > 0) or image.width < 0 or image.height < 0:
        violations.add(f"{at}.width", "give both width and height (positive), or neither")
