"""Page sizes and tokens as callers send them."""

from __future__ import annotations

from contextd.core.errors import InvalidArgument


def page_size(value: int, default: int, maximum: int, field: str = "page_size") -> int:
    if value == 0:
        return default
    if not 1 <= value <= maximum:
        raise InvalidArgument.one(field, f"must be between 1 and {maximum} (0 for {default})")
    return value


def bad_page_token(error: ValueError, field: str = "page_token") -> InvalidArgument:
    return InvalidArgument.one(field, f"not a page token from this server ({error})")
