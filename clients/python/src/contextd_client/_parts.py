"""Content parts (text and images) of a message <-> the generated ``pb.ContentPart``.

A message's ``content`` may be a list of parts instead of a string: a string is a text
part; ``{"text": ...}`` too; an image is ``{"image": {"url": ...}}`` or ``{"image":
{"data": b"...", "media_type": "image/png"}}`` (optionally ``"detail"``: "auto", "low"
or "high", and for a URL ``"width"`` and ``"height"``). :func:`image_part` makes one
from bytes, a file or a URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias, cast

from ._fields import _enum_name, _int, _sequence, _text, _type_name
from ._pb import context_pb2 as pb

#: A text (a string or ``{"text": ...}``), an image dict, or a generated ``pb.ContentPart``.
PartLike: TypeAlias = str | Mapping[str, Any] | pb.ContentPart

_DETAILS: dict[str | None, int] = {
    None: pb.IMAGE_DETAIL_UNSPECIFIED,
    "auto": pb.IMAGE_DETAIL_AUTO,
    "low": pb.IMAGE_DETAIL_LOW,
    "high": pb.IMAGE_DETAIL_HIGH,
}
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _sniffed(data: bytes) -> str:
    """The media type of the bytes by their signature; "" when unknown (the server then
    names the field)."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


def image_part(
    *,
    data: bytes | None = None,
    path: str | os.PathLike[str] | None = None,
    url: str | None = None,
    media_type: str | None = None,
    detail: str | None = None,
    width: int | None = None,
    height: int | None = None,
) -> dict[str, Any]:
    """An image part from exactly one of ``data`` (the file's bytes), ``path`` (a file to
    read) or ``url`` (https). The media type of bytes is found from their signature when
    not given. ``width`` and ``height`` are for a URL image (the server reads the size of
    bytes itself)."""
    given = [name for name, v in (("data", data), ("path", path), ("url", url)) if v is not None]
    if len(given) != 1:
        raise TypeError(f"give exactly one of data, path or url, not {given or 'none'}")
    if detail not in _DETAILS:
        raise ValueError(f"detail must be 'auto', 'low' or 'high', not {detail!r}")
    image: dict[str, Any] = {}
    if url is not None:
        image["url"] = _text(url, "url")
        if width is not None or height is not None:
            image["width"] = _int(width, "width")
            image["height"] = _int(height, "height")
    else:
        raw = Path(path).read_bytes() if path is not None else data
        if not isinstance(raw, bytes):
            raise TypeError(f"data must be bytes, not {_type_name(raw)}")
        image["data"] = raw
        image["media_type"] = media_type or _sniffed(raw)
    if detail is not None:
        image["detail"] = detail
    return {"image": image}


def part_to_pb(part: object, where: str) -> pb.ContentPart:
    if isinstance(part, pb.ContentPart):
        return part
    if isinstance(part, str):
        return pb.ContentPart(text=part)
    if not isinstance(part, Mapping):
        raise TypeError(f"{where} must be a string or a part mapping, not {_type_name(part)}")
    if "text" in part:
        return pb.ContentPart(text=_text(part["text"], f"{where}.text"))
    image = part.get("image")
    if not isinstance(image, Mapping):
        raise TypeError(f"{where} must have 'text' or an 'image' mapping")
    detail = image.get("detail")
    if detail not in _DETAILS:
        raise ValueError(f"{where}.image.detail must be 'auto', 'low' or 'high'")
    out = pb.ImagePart(
        media_type=_text(image.get("media_type"), f"{where}.image.media_type"),
        detail=cast(pb.ImageDetail, _DETAILS[detail]),
        width=_int(image.get("width", 0), f"{where}.image.width"),
        height=_int(image.get("height", 0), f"{where}.image.height"),
    )
    if "url" in image:
        out.url = _text(image["url"], f"{where}.image.url")
    else:
        data = image.get("data")
        if not isinstance(data, bytes):
            raise TypeError(f"{where}.image needs 'url' (a string) or 'data' (bytes)")
        out.data = data
    return pb.ContentPart(image=out)


def parts_to_pb(parts: object, where: str) -> list[pb.ContentPart]:
    items = _sequence(parts, where, "parts")
    return [part_to_pb(p, f"{where}[{i}]") for i, p in enumerate(items)]


def part_from_pb(part: pb.ContentPart) -> dict[str, Any]:
    if part.WhichOneof("part") == "text":
        return {"text": part.text}
    p = part.image
    image: dict[str, Any] = {"url": p.url} if p.WhichOneof("source") == "url" else {"data": p.data}
    if p.media_type:
        image["media_type"] = p.media_type
    image["detail"] = (
        "auto"
        if p.detail == pb.IMAGE_DETAIL_UNSPECIFIED
        else _enum_name(pb.ImageDetail, p.detail, "IMAGE_DETAIL_")
    )
    if p.width or p.height:
        image["width"], image["height"] = p.width, p.height
    return {"image": image}


def user_message_fields(user_message: str | Sequence[PartLike]) -> dict[str, Any]:
    """The request fields of a user message: its text, or its parts."""
    if isinstance(user_message, str) or user_message is None:
        return {"user_message": _text(user_message, "user_message")}
    return {"user_message_parts": parts_to_pb(user_message, "user_message")}
