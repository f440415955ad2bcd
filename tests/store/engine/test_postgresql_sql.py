"""The repositories' shared SQL as PostgreSQL takes it: placeholders translated once per
statement."""

from __future__ import annotations

import pytest
from contextd.store.engine.postgresql_sql import translate


def test_placeholders_are_translated_once_per_statement() -> None:
    positional = translate("SELECT '?', \"a?\" FROM t WHERE a = ? AND b::text = ?")
    assert positional.sql == "SELECT '?', \"a?\" FROM t WHERE a = $1 AND b::text = $2"
    assert positional.arguments((1, 2)) == (1, 2)
    named = translate("SELECT ':x' WHERE a = :user OR b = :tenant OR c = :user")
    assert named.sql == "SELECT ':x' WHERE a = $1 OR b = $2 OR c = $1"
    assert named.arguments({"tenant": "t", "user": "u", "unused": 0}) == ["u", "t"]
    assert translate("UPDATE t SET a = 1").returns_rows is False
    assert translate("DELETE FROM t RETURNING id").returns_rows is True
    assert translate(" with x AS (SELECT 1) SELECT * FROM x").returns_rows is True
    with pytest.raises(ValueError, match="mixes"):
        translate("SELECT ? WHERE a = :b")
