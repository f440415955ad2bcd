"""Content parts (text and images) between the proto messages and core/content.py."""

from __future__ import annotations

from collections.abc import Sequence

from contextd.core.content import (
    ContentPart,
    ImageDetail,
    ImageLimits,
    ImagePart,
    TextPart,
    checked_parts,
)
from contextd.core.errors import Violations
from contextd.v1 import context_pb2 as pb

_DETAILS = {
    pb.IMAGE_DETAIL_UNSPECIFIED: ImageDetail.AUTO,
    pb.IMAGE_DETAIL_AUTO: ImageDetail.AUTO,
    pb.IMAGE_DETAIL_LOW: ImageDetail.LOW,
    pb.IMAGE_DETAIL_HIGH: ImageDetail.HIGH,
}
_DETAIL_TO_PB = {
    ImageDetail.AUTO: pb.IMAGE_DETAIL_UNSPECIFIED,
    ImageDetail.LOW: pb.IMAGE_DETAIL_LOW,
    ImageDetail.HIGH: pb.IMAGE_DETAIL_HIGH,
}


def parts_from_pb(
    parts: Sequence[pb.ContentPart], at: str, limits: ImageLimits, violations: Violations
) -> tuple[ContentPart, ...]:
    """The parts in the domain's terms, checked (``at`` names the parts field)."""
    out: list[ContentPart] = []
    for i, part in enumerate(parts):
        kind = part.WhichOneof("part")
        if kind == "text":
            out.append(TextPart(part.text))
        elif kind == "image":
            out.append(_image_from_pb(part.image, f"{at}[{i}].image", violations))
        else:
            violations.add(f"{at}[{i}]", "a part needs text or an image")
    return checked_parts(out, at, limits, violations)


def _image_from_pb(image: pb.ImagePart, at: str, violations: Violations) -> ImagePart:
    detail = _DETAILS.get(image.detail)
    if detail is None:
        violations.add(f"{at}.detail", f"unknown detail {image.detail}")
        detail = ImageDetail.AUTO
    if image.WhichOneof("source") == "data":
        # The size of inline data is read from its header, not taken from the caller.
        return ImagePart(data=image.data, media_type=image.media_type, detail=detail)
    return ImagePart(
        url=image.url,
        media_type=image.media_type,
        detail=detail,
        width=image.width,
        height=image.height,
    )


def fill_parts(out: pb.Message, parts: Sequence[ContentPart]) -> None:
    """Set ``out.parts`` (its content left empty, as the API has it)."""
    out.content = ""
    for part in parts:
        if isinstance(part, TextPart):
            out.parts.add(text=part.text)
            continue
        image = out.parts.add().image
        if part.url:
            image.url = part.url
        else:
            image.data = part.data
            image.media_type = part.media_type
        image.detail = _DETAIL_TO_PB[part.detail]
        image.width = part.width
        image.height = part.height
