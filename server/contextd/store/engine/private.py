"""What contextd keeps on disk is readable only by the account that runs it.

The data directory holds every user's conversations, memories and event logs, the API
keys' hashes and the secret that makes ids opaque. It is made ``0700`` and everything
contextd writes in it ``0600``, whatever the umask: files are created with that mode
(SQLite gives its ``-wal`` and ``-shm`` files the database file's mode), folders are
set to it after they are made. A data directory from before, or one loosened by hand,
is made private when it is opened, with one warning naming what changed; where that
cannot be done (a path owned by another account) the open is refused with the fix.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
# Bits that let another account read, write or enter.
_OTHERS = stat.S_IRWXG | stat.S_IRWXO

log = logging.getLogger("contextd.store")


class NotPrivate(RuntimeError):
    """A path in the data directory that others can read and this account cannot fix."""


def make_dir(path: Path) -> None:
    """``path`` made, and any missing folder above it, each ``0700`` (an existing one
    is left to ``make_private``, which says what it changes)."""
    missing = [path, *(parent for parent in path.parents if not parent.exists())]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
        else:
            os.chmod(folder, DIR_MODE)  # mkdir's mode passes through the umask


def open_private(path: str | Path, flags: int) -> int:
    """``os.open`` of a file created ``0600`` (an existing one keeps its mode)."""
    return os.open(path, flags, FILE_MODE)


def write_private(path: Path, data: bytes) -> None:
    """``path`` written with ``data``, created ``0600``."""
    with open(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as file:
        file.write(data)


def create_empty(path: Path) -> None:
    """An empty ``0600`` file at ``path`` unless one exists: made before a library
    (SQLite) creates it with its own default mode."""
    os.close(open_private(path, os.O_WRONLY | os.O_CREAT))


def make_private(data_dir: Path) -> list[Path]:
    """Every folder of ``data_dir`` that others can enter, and every file in the folders
    checked, set to ``0700`` / ``0600``; the paths changed, in the order found.

    The top folder and its entries are always checked. A folder that was already
    private is not walked: nothing in it can be reached by another account. Links are
    left as they are. NotPrivate names a path that cannot be changed."""
    changed: list[Path] = []
    _private_tree(data_dir, changed, top=True)
    return changed


def prepare_data_dir(data_dir: Path) -> None:
    """The data directory made (``0700``) and private, with one warning when anything
    in it had to change."""
    make_dir(data_dir)
    changed = make_private(data_dir)
    if changed:
        shown = [str(path) for path in changed[:10]]
        more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
        log.warning(
            "the data directory was readable by other accounts; made it private: %s%s",
            ", ".join(shown),
            more,
            extra={"data_dir": str(data_dir), "changed": len(changed)},
        )


def _private_tree(folder: Path, changed: list[Path], *, top: bool = False) -> None:
    was_open = _fix(folder, DIR_MODE, changed)
    if not (was_open or top):
        return
    with os.scandir(folder) as entries:
        for entry in entries:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                _private_tree(path, changed)
            elif entry.is_file(follow_symlinks=False):
                _fix(path, FILE_MODE, changed)


def _fix(path: Path, mode: int, changed: list[Path]) -> bool:
    """Whether ``path`` was open to others (then changed to ``mode``)."""
    if _restrict(path, mode):
        changed.append(path)
        return True
    return False


def _restrict(path: Path, mode: int) -> bool:
    current = stat.S_IMODE(os.lstat(path).st_mode)
    if not current & _OTHERS:
        return False
    try:
        os.chmod(path, mode)
    except PermissionError:
        kind = "chmod 700" if mode == DIR_MODE else "chmod 600"
        raise NotPrivate(
            f"{path} can be read by other accounts and this account cannot change that; "
            f"run `{kind} {path}` as its owner (or give it to this account with chown)"
        ) from None
    return True
