"""Each engine's migrations, sqlite/NNNN_name.sql and postgresql/NNNN_name.sql, and how the
two trees correspond.

A database records the versions applied to it (``schema_migrations``) and is migrated
forward from its highest one, so a migration keeps its number once released: renumbering
would re-apply or skip one on a database that exists. The trees therefore number apart.
PostgreSQL came after SQLite's first seven migrations: its 0001_schema makes the schema
those leave. Since then each change of the schema is one migration in each tree, of the
same name, except PostgreSQL's own 0004 (its event logs are rows, which follow their
sessions) and 0011 (the versions its replicas check their caches against).
``SQLITE_OF_POSTGRESQL`` lists the correspondence, and a test keeps it
covering both trees.
"""

from __future__ import annotations

from importlib import resources

SQLITE_MIGRATIONS = "contextd.store.engine.migrations.sqlite"
POSTGRESQL_MIGRATIONS = "contextd.store.engine.migrations.postgresql"

# Each PostgreSQL migration -> the SQLite migrations that make the same change.
SQLITE_OF_POSTGRESQL: dict[int, tuple[int, ...]] = {
    1: (1, 2, 3, 4, 5, 6, 7),  # the schema as those leave it
    2: (8,),
    3: (9,),
    4: (),  # PostgreSQL's own: a session's event log rows go with it
    5: (10,),
    6: (11,),
    7: (12,),
    8: (13,),
    9: (14,),
    10: (15,),
    11: (16,),
    12: (17,),
}


def migration_files(package: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for every file NNNN_name.sql in ``package``, in order; the
    versions must be 1..n without gaps."""
    found = []
    for entry in resources.files(package).iterdir():
        if entry.name.endswith(".sql"):
            version, _, name = entry.name.removesuffix(".sql").partition("_")
            found.append((int(version), name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"{package}: migrations must be numbered 1..n without gaps: {versions}")
    return found
