"""``contextd keys``: create, list and revoke the API keys of ``--auth api-key``.

They open the server's database directly (the data directory's SQLite file, or its
PostgreSQL database) and do not take the server's lock: SQLite lets this second process
write a key while the server runs, and the server reads a key's row on each call, so a
new key works and a revoked one stops at once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from contextd.config import Settings
from contextd.core.identity import DEFAULT_TENANT, TENANT_ID_RULE, is_tenant_id
from contextd.store.api_keys import ApiKey, ApiKeyRepo
from contextd.store.engine.private import NotPrivate
from contextd.store.open import open_store

_DAY_S = 86_400.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="keys_command", required=True)
    create = commands.add_parser("create", help="make a key and print it (shown only this once)")
    create.add_argument("--user", required=True, help="the user the key acts as")
    create.add_argument("--tenant", default=DEFAULT_TENANT, help="the user's tenant")
    create.add_argument(
        "--service",
        action="store_true",
        help="a service key (an add-in's backend): may name any user_id in requests",
    )
    create.add_argument(
        "--expires-days", type=float, default=None, help="days until it expires (default: never)"
    )
    create.add_argument("--name", default="", help="a label for `keys list`")
    commands.add_parser("list", help="every key, without secrets")
    revoke = commands.add_parser("revoke", help="stop a key from working (within a second)")
    revoke.add_argument("key_id", metavar="ID", help="the key's id, as `keys list` shows it")
    for command in commands.choices.values():
        command.add_argument(
            "--data-dir",
            type=lambda raw: Path(raw).expanduser(),
            default=None,
            help="the server's data directory (default: $CONTEXTD_DATA_DIR, "
            "else $XDG_DATA_HOME/contextd)",
        )
        command.add_argument(
            "--database-url",
            default=None,
            help="the server's PostgreSQL database (default: $CONTEXTD_DATABASE_URL, "
            "else SQLite in the data directory)",
        )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
    try:
        store = await open_store(settings.database_url, settings.data_dir, pool_size=1)
    except NotPrivate as error:
        print(f"keys: {error}", file=sys.stderr)
        return 1
    try:
        keys = ApiKeyRepo(store.db)
        if args.keys_command == "create":
            return await _create(keys, args)
        if args.keys_command == "list":
            _print_table(await keys.list())
            return 0
        if not await keys.revoke(args.key_id):
            print(f"no key with id {args.key_id!r}", file=sys.stderr)
            return 1
        print(f"revoked {args.key_id}", file=sys.stderr)
        return 0
    finally:
        await store.close()


async def _create(keys: ApiKeyRepo, args: argparse.Namespace) -> int:
    if args.expires_days is not None and args.expires_days <= 0:
        print("--expires-days must be positive", file=sys.stderr)
        return 2
    if not is_tenant_id(args.tenant):
        print(f"--tenant: {TENANT_ID_RULE}", file=sys.stderr)
        return 2
    expires_at = None if args.expires_days is None else time.time() + args.expires_days * _DAY_S
    key, parts = await keys.create(
        args.user,
        tenant_id=args.tenant,
        service=args.service,
        name=args.name,
        expires_at=expires_at,
    )
    # The key alone on stdout, for scripts; what it is on stderr.
    print(parts.token)
    kind = "service key" if key.service else "key"
    print(
        f"created {kind} {key.id} for user {key.user_id} (tenant {key.tenant_id}); "
        "store it now, it is not shown again",
        file=sys.stderr,
    )
    return 0


_HEADER = ("id", "name", "user", "tenant", "service", "created", "last used", "expires", "revoked")


def _print_table(keys: list[ApiKey]) -> None:
    rows = [_HEADER, *(_row(key) for key in keys)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


def _row(key: ApiKey) -> tuple[str, ...]:
    return (
        key.id,
        key.name or "-",
        key.user_id,
        key.tenant_id,
        "yes" if key.service else "no",
        _when(key.created_at),
        _when(key.last_used_at),
        _when(key.expires_at),
        _when(key.revoked_at),
    )


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
