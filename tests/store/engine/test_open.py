"""The database URL: anything but PostgreSQL's refused, the password masked for logs."""

from __future__ import annotations

import pytest
from contextd.store.engine.open import check_database_url, masked_url


def test_urls_are_checked_and_masked() -> None:
    check_database_url("postgresql://u:p@db:5432/contextd")
    check_database_url("postgres://db/contextd")
    with pytest.raises(SystemExit, match="only postgresql://") as refused:
        check_database_url("mysql://root:hunter2@db/contextd")
    assert "hunter2" not in str(refused.value)
    assert masked_url("postgresql://u:hunter2@db:5432/c") == "postgresql://u:***@db:5432/c"
    assert masked_url("postgresql://u:pw@[::1]/c?sslmode=require") == (
        "postgresql://u:***@[::1]/c?sslmode=require"
    )
    assert masked_url("postgresql://db/c") == "postgresql://db/c"
