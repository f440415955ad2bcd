"""What a user id and a stored id may be (app/scope.py): the checks every request's ids
go through."""

from __future__ import annotations

import pytest
from contextd.app.scope import Caller, is_stored_id, is_user_id
from contextd.core.errors import InvalidArgument


@pytest.mark.parametrize(
    "user_id", ["alice", "ada@example.com", "u-1_2.3", "用户", "Zoë", "x" * 128, "🙂"]
)
def test_visible_user_ids_are_accepted(user_id: str) -> None:
    assert is_user_id(user_id)
    assert Caller.of(user_id).user_id == user_id


@pytest.mark.parametrize(
    "user_id",
    [
        "",
        "x" * 129,
        "a b",
        "a\tb",
        "a\x00b",  # NUL
        "ali\u202ece",  # a right-to-left override: shows as another id
        "ali\u200bce",  # zero-width space
        "\ufeffalice",  # byte order mark
        "a\u3000b",  # ideographic space
        "a\u2028b",  # line separator
        "a\ud800b",  # a lone surrogate
        "a\U000f0000",  # private use
    ],
)
def test_hidden_characters_make_no_user_id(user_id: str) -> None:
    assert not is_user_id(user_id)
    with pytest.raises(InvalidArgument) as raised:
        Caller.of(user_id, "session.user_id")
    assert [v.field for v in raised.value.violations] == ["session.user_id"]


@pytest.mark.parametrize("value", ["0", "1", "42", "9" * 18])
def test_stored_ids_are_ascii_digits(value: str) -> None:
    assert is_stored_id(value)


@pytest.mark.parametrize("value", ["", "𝟙", "١", "¹", "①", "9" * 19, "-1", "1.0", " 1"])
def test_look_alike_digits_are_no_stored_id(value: str) -> None:
    assert not is_stored_id(value)
