"""The two engines' migration trees: numbered 1..n each, and the index of which SQLite
migrations each PostgreSQL one corresponds to covers both trees, in order."""

from __future__ import annotations

from contextd.store.engine.migrations import (
    POSTGRESQL_MIGRATIONS,
    SQLITE_MIGRATIONS,
    SQLITE_OF_POSTGRESQL,
    migration_files,
)


def test_every_migration_has_its_counterpart_in_order() -> None:
    sqlite = {version: name for version, name, _ in migration_files(SQLITE_MIGRATIONS)}
    postgresql = migration_files(POSTGRESQL_MIGRATIONS)
    assert sorted(SQLITE_OF_POSTGRESQL) == [version for version, _, _ in postgresql]
    # Every SQLite migration once, in the order of PostgreSQL's.
    covered = [v for version in sorted(SQLITE_OF_POSTGRESQL) for v in SQLITE_OF_POSTGRESQL[version]]
    assert covered == sorted(sqlite)
    for version, name, sql in postgresql:
        counterparts = SQLITE_OF_POSTGRESQL[version]
        header = sql.splitlines()[0]
        assert header.startswith(f"-- {version:04d}_{name}:"), header
        if len(counterparts) == 1:  # one change in each tree: the same name, and said so
            (counterpart,) = counterparts
            assert sqlite[counterpart] == name, (version, counterpart)
            assert f"SQLite's {counterpart:04d}" in header, header
        elif counterparts:
            assert f"{counterparts[0]:04d} to {counterparts[-1]:04d}" in header, header
