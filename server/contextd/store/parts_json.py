"""A message's content parts as the JSON of the conversation's ``parts`` column.

``[{"text": "..."}, {"image": {"url": "https://..."} | {"data": <base64>,
"media_type": "image/png"}, "detail": "auto", "width": 640, "height": 480}]``; NULL when
the message has no parts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from contextd.core.content import ContentPart, ImageDetail, ImagePart, TextPart


def parts_json(parts: Sequence[ContentPart]) -> str | None:
    if not parts:
        return None
    return json.dumps([_part_object(p) for p in parts], ensure_ascii=False)


def _part_object(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    image: dict[str, Any] = (
        {"url": part.url}
        if part.url
        else {"data": base64.b64encode(part.data).decode("ascii"), "media_type": part.media_type}
    )
    image |= {"detail": part.detail.value, "width": part.width, "height": part.height}
    return {"image": image}


def parts_from_json(text: str | None) -> tuple[ContentPart, ...]:
    if not text:
        return ()
    return tuple(_part(p) for p in json.loads(text))


def _part(obj: dict[str, Any]) -> ContentPart:
    if "text" in obj:
        return TextPart(obj["text"])
    image = obj["image"]
    return ImagePart(
        url=image.get("url", ""),
        data=base64.b64decode(image["data"]) if "data" in image else b"",
        media_type=image.get("media_type", ""),
        detail=ImageDetail(image.get("detail", "auto")),
        width=image.get("width", 0),
        height=image.get("height", 0),
    )
