"""The format and pixel size of an image from its first bytes: PNG, JPEG, GIF and WebP.

Read from memory only. (imagesize, the library for this, takes a str as a path or a URL
to fetch and bytes as a path: a server holding a caller's bytes wants neither.)
"""

from __future__ import annotations

_PNG = b"\x89PNG\r\n\x1a\n"
# JPEG markers that start a frame and carry its size (not DHT C4, JPG C8 or DAC CC).
_JPEG_FRAMES = frozenset({*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC)}) | {
    0xCD,
    0xCE,
    0xCF,
}
# Markers without a length field: TEM and the restart markers.
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes are, by their signature; None when none of the four."""
    if data.startswith(_PNG):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from the image's header; None when it cannot be read."""
    media_type = sniff_media_type(data)
    if media_type == "image/png":
        size = _png_size(data)
    elif media_type == "image/jpeg":
        size = _jpeg_size(data)
    elif media_type == "image/gif":
        size = (_le16(data, 6), _le16(data, 8)) if len(data) >= 10 else None
    elif media_type == "image/webp":
        size = _webp_size(data)
    else:
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _be16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "big")


def _le16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _png_size(data: bytes) -> tuple[int, int] | None:
    # The first chunk is IHDR: width and height, 4 bytes each, big-endian.
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    # Walk the segments to the first start-of-frame: length, precision, height, width.
    at = 2
    end = len(data)
    while at + 1 < end:
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_STANDALONE:
            at += 2
            continue
        if marker in _JPEG_FRAMES:
            if at + 9 > end:
                return None
            return _be16(data, at + 7), _be16(data, at + 5)
        if marker in (0xD9, 0xDA):  # end of image, or scan data before any frame
            return None
        length = _be16(data, at + 2)
        if length < 2:
            return None
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        return _le16(data, 26) & 0x3FFF, _le16(data, 28) & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    return None
