"""What an image costs in a prompt, by the providers' published rules.

- The tiktoken tokenizers (OpenAI's models): detail ``low`` costs 85 tokens; ``high`` and
  ``auto`` scale the image to fit 2048x2048, then its shortest side down to 768, and cost
  170 per 512-pixel tile plus 85.
- The byte estimate (Anthropic-style): the image scaled to a long edge of at most 1568
  pixels costs ``ceil(width * height / 750)``.
- An image of unknown size (a URL image given without width and height) is counted as a
  1024x1024 image: 765 tokens under tiktoken (85 at detail low), 1399 under the estimate.
"""

from __future__ import annotations

import math

from contextd.core.content import ImageDetail, ImagePart

UNKNOWN_SIZE = (1024, 1024)

_LOW_DETAIL_TOKENS = 85
_TILE_TOKENS = 170
_TILE = 512
_FIT_EDGE = 2048
_SHORT_SIDE = 768
_ANTHROPIC_LONG_EDGE = 1568
_ANTHROPIC_PIXELS_PER_TOKEN = 750


def openai_image_tokens(width: int, height: int, detail: ImageDetail) -> int:
    if detail is ImageDetail.LOW:
        return _LOW_DETAIL_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > _FIT_EDGE:
        scale = _FIT_EDGE / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > _SHORT_SIDE:
        scale = _SHORT_SIDE / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(max(1, int(w)) / _TILE) * math.ceil(max(1, int(h)) / _TILE)
    return _TILE_TOKENS * tiles + _LOW_DETAIL_TOKENS


def anthropic_image_tokens(width: int, height: int) -> int:
    w, h = float(width), float(height)
    if max(w, h) > _ANTHROPIC_LONG_EDGE:
        scale = _ANTHROPIC_LONG_EDGE / max(w, h)
        w, h = max(1, int(w * scale)), max(1, int(h * scale))
    return math.ceil(w * h / _ANTHROPIC_PIXELS_PER_TOKEN)


def image_tokens(image: ImagePart, openai_rule: bool) -> int:
    """The image's cost under OpenAI's rule or else Anthropic's (see the module docstring)."""
    width, height = (image.width, image.height) if image.width and image.height else UNKNOWN_SIZE
    if openai_rule:
        return openai_image_tokens(width, height, image.detail)
    return anthropic_image_tokens(width, height)
