"""Copy everything a contextd database holds into another one, SQLite to PostgreSQL or
back: ``contextd store copy --from SOURCE --to TARGET``.

SOURCE and TARGET are each a PostgreSQL URL (postgresql://user@host/database) or a data
directory (the directory that holds contextd.sqlite3 and the event logs under history/).
Both are migrated to this contextd's schema first. Ids are kept. What the target already
holds stays, and a second copy copies nothing new. A row the target holds under the same
key with other values stops the copy before it wrote anything (the tables are copied in
one transaction); an event log that differs stops it after the tables and the logs before
that one were copied.

Stop the servers of both first: a data directory a server is serving is refused, and a
PostgreSQL database must not be written to while it is copied.

Prints, per table and for the event log lines, the count in the source, copied, and in
the target; exits 1 when they do not add up or the copy stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path

from contextd.core.errors import DatabaseUnavailable
from contextd.store.engine.data_lock import DataDirInUse, DataDirLock
from contextd.store.engine.private import NotPrivate, make_dir
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.store.open import POSTGRES_SCHEMES, masked_url, open_store
from contextd.store_copy.copy import copy_store
from contextd.store_copy.tables import CopyConflict, TableCount


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="store_command", required=True)
    copy = commands.add_parser(
        "copy",
        help="copy everything from one database to another (SQLite <-> PostgreSQL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    copy.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="SOURCE",
        help="a postgresql:// URL or a data directory",
    )
    copy.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="TARGET",
        help="a postgresql:// URL or a data directory (made if missing)",
    )


@dataclass(frozen=True, slots=True)
class Place:
    """A database named on the command line: a PostgreSQL URL or a data directory."""

    url: str = ""
    data_dir: Path = Path()

    @classmethod
    def parse(cls, raw: str) -> Place:
        if raw.partition("://")[0] in POSTGRES_SCHEMES:
            return cls(url=raw)
        return cls(data_dir=Path(raw).expanduser().resolve())

    def __str__(self) -> str:
        return masked_url(self.url) if self.url else str(self.data_dir)


def run(args: argparse.Namespace) -> int:
    source, target = Place.parse(args.source), Place.parse(args.target)
    if source == target:
        print(f"--from and --to are both {source}", file=sys.stderr)
        return 2
    if not source.url and not (source.data_dir / DB_FILENAME).is_file():
        print(f"--from {source}: no {DB_FILENAME} in that directory", file=sys.stderr)
        return 2
    if not target.url and target.data_dir.is_file():
        print(f"--to {target}: a file; give a data directory", file=sys.stderr)
        return 2
    try:
        with ExitStack() as locks:
            for place in (source, target):
                if not place.url:
                    make_dir(place.data_dir)
                    locks.callback(DataDirLock.acquire(place.data_dir).release)
            counts = asyncio.run(_copy(source, target))
    except (DataDirInUse, DatabaseUnavailable, CopyConflict, NotPrivate) as error:
        print(f"store copy: {error}", file=sys.stderr)
        return 1
    _print_counts(counts)
    wrong = [count.name for count in counts if not count.matches]
    if wrong:
        print(f"store copy: the counts do not add up for {', '.join(wrong)}", file=sys.stderr)
        return 1
    copied = sum(count.copied for count in counts)
    print(f"copied {copied} rows and lines from {source} to {target}", file=sys.stderr)
    return 0


async def _copy(source: Place, target: Place) -> list[TableCount]:
    async with AsyncExitStack() as stack:
        source_store = await open_store(source.url, source.data_dir, pool_size=2)
        stack.push_async_callback(source_store.close)
        target_store = await open_store(target.url, target.data_dir, pool_size=2)
        stack.push_async_callback(target_store.close)
        return await copy_store(source_store, target_store)
    raise AssertionError("unreachable")  # mypy: AsyncExitStack may swallow errors


_HEADER = ("table", "source", "copied", "target")


def _print_counts(counts: list[TableCount]) -> None:
    rows = [_HEADER, *((c.name, str(c.source), str(c.copied), str(c.target)) for c in counts)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
        ]
        print("  ".join(cells))
