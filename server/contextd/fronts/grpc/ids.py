"""Ids at the API's edge: every id a request names is checked for its form before anything
is looked up, and message and memory ids are translated between the opaque strings
callers see and the row numbers app/ and the store use (core/ids.py).

A string of the wrong form (too long, a character no id has) is INVALID_ARGUMENT naming
its field, quoting nothing. A string of the right form that this deployment did not give
out for that kind of row (a forgery, another deployment's id, a memory's id where a
message's goes, a number as ids were once given out) is NOT_FOUND, as an id of a deleted
row or of another user is: no answer tells which.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextd.app.scope import not_found
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.ids import ID_FORM_RULE, IdKind, OpaqueIds, is_id_form

_NOT_AN_ID = f"not an id: {ID_FORM_RULE}"


def check_id(value: str, field: str, violations: Violations) -> None:
    """Record ``field`` when it names an id (it is not empty) of the wrong form."""
    if value and not is_id_form(value):
        violations.add(field, _NOT_AN_ID)


def check_ids(*named: tuple[str, str]) -> None:
    """INVALID_ARGUMENT naming each (field, value) whose value has the wrong form."""
    v = Violations()
    for field, value in named:
        check_id(value, field, v)
    v.raise_if_any()


class PublicIds:
    """Message and memory ids, both ways."""

    __slots__ = ("_codec",)

    def __init__(self, codec: OpaqueIds) -> None:
        self._codec = codec

    def message(self, row: str | int) -> str:
        """A stored message's id (app/ holds it as its row number, or that number's
        digits); "" for none."""
        return self._codec.encode(IdKind.MESSAGE, int(row)) if row else ""

    def memory(self, row: int) -> str:
        return self._codec.encode(IdKind.MEMORY, row) if row else ""

    def memory_change(self, row: int) -> str:
        return self._codec.encode(IdKind.MEMORY_CHANGE, row)

    def compression_summary(self, row: int) -> str:
        return self._codec.encode(IdKind.COMPRESSION_SUMMARY, row)

    def message_row(self, value: str, field: str) -> str:
        """The row number (as digits, app/'s form) of the message id in ``field``; ""
        stays "" (app/ says whether it is required)."""
        return self._row(IdKind.MESSAGE, value, field, "message")

    def message_rows(self, values: Sequence[str], field: str) -> list[str]:
        return [self.message_row(v, f"{field}[{k}]") for k, v in enumerate(values)]

    def memory_row(self, value: str, field: str) -> str:
        return self._row(IdKind.MEMORY, value, field, "memory")

    def _row(self, kind: IdKind, value: str, field: str, what: str) -> str:
        if not value:
            return ""
        if not is_id_form(value):
            raise InvalidArgument.one(field, _NOT_AN_ID)
        row = self._codec.decode(kind, value)
        if row is None:
            raise not_found(what, field)
        return str(row)
