"""Every public method of both Python clients declares what it returns: no ``Any`` and no
bare ``dict[str, Any]``, and a type checker holds callers to the returned TypedDicts."""

from __future__ import annotations

import collections.abc
import inspect
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from contextd_client import AsyncContextClient, ContextClient

# Containers whose item types are checked too: a list of dicts is no better than a dict.
_CONTAINERS = {
    list,
    tuple,
    collections.abc.Iterator,
    collections.abc.AsyncIterator,
    collections.abc.Coroutine,
    collections.abc.Awaitable,
}


def _untyped(hint: object) -> bool:
    """Whether ``hint`` is ``Any``, ``dict[str, Any]``, or a container or union of them."""
    if hint is Any:
        return True
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is dict:
        return args[1:] == (Any,)
    if origin in _CONTAINERS or origin in (typing.Union, types.UnionType):
        return any(_untyped(arg) for arg in args)
    return False


def _public_methods(cls: type) -> list[tuple[str, Any]]:
    return [
        (name, member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    ]


@pytest.mark.parametrize("cls", [ContextClient, AsyncContextClient])
def test_no_public_method_returns_any_or_a_bare_dict(cls: type) -> None:
    methods = _public_methods(cls)
    assert len(methods) > 20
    untyped = [
        name for name, method in methods if _untyped(get_type_hints(method).get("return", Any))
    ]
    assert untyped == []


def test_the_check_sees_untyped_returns() -> None:
    assert _untyped(Any) and _untyped(dict[str, Any]) and _untyped(list[dict[str, Any]])
    assert _untyped(collections.abc.Iterator[dict[str, Any]]) and _untyped(dict[str, Any] | None)
    assert not _untyped(dict[str, int]) and not _untyped(list[str]) and not _untyped(None)


# Uses of the typed results; a type checker must accept every line.
USAGE = """
from datetime import datetime
from contextd_client import (
    AsyncContextClient, ContextClient, DeletedCounts, SessionEvent, Skill, StoredMessage,
    Template,
)

def sync_use(client: ContextClient) -> None:
    stored: list[StoredMessage] = client.append_messages(
        "ada", "s", [{"role": "user", "content": "hi"}]
    )
    first = stored[0]
    role: str = first["role"]
    seq: int = first["seq"]
    when: datetime | None = first["create_time"]
    calls = first.get("tool_calls", [])
    names = [call["name"] for call in calls]
    for message in client.iter_messages("ada", "s"):
        status: str = message["status"]
    template: Template = client.upsert_template("support", "Be kind.")
    version: int = template["version"]
    skills: list[Skill] = client.list_skills(app="word")
    apps: list[str] = skills[0]["apps"]
    counts: DeletedCounts = client.delete_user("ada")
    total: int = counts["sessions"] + counts["api_keys"]
    for event in client.export_events("ada", "s"):
        ts: str = event["ts"]
        kind = event.get("type", "")

async def async_use(client: AsyncContextClient) -> None:
    messages: list[StoredMessage] = await client.list_messages("ada", "s")
    async for message in client.iter_messages("ada", "s"):
        turn: int = message["turn_index"]
    events: list[SessionEvent] = [e async for e in client.export_events("ada", "s")]
    template: Template = (await client.list_templates())[0]
    counts: DeletedCounts = await client.delete_user("ada")
"""

# Mistakes the types catch, each with the error mypy names it by.
MISTAKES = [
    ('client.list_templates()[0]["versoin"]', "typeddict-item"),
    ('client.delete_user("ada")["users"]', "typeddict-item"),
    ('x: int = client.list_messages("ada", "s")[0]["content"]', "assignment"),
    ('y: str = client.upsert_skill("n", "p")["enabled"]', "assignment"),
]


def _mypy(source: str, tmp_path: Path) -> tuple[str, int]:
    """mypy in a process of its own: in this one it would raise the recursion limit for
    every later test (the server refuses JSON nested deeper than Python parses)."""
    module = tmp_path / "usage.py"
    module.write_text(source)
    args = ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(module)]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args], capture_output=True, text=True, timeout=300
    )
    return done.stdout + done.stderr, done.returncode


def test_a_type_checker_accepts_typed_use(tmp_path: Path) -> None:
    out, status = _mypy(USAGE, tmp_path)
    assert (out, status) == ("", 0)


def test_a_type_checker_rejects_wrong_keys_and_types(tmp_path: Path) -> None:
    body = "\n".join(f"    {line}" for line, _ in MISTAKES)
    source = "from contextd_client import ContextClient\n\n"
    source += f"def use(client: ContextClient) -> None:\n{body}\n"
    out, status = _mypy(textwrap.dedent(source), tmp_path)
    assert status == 1
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert [line.rsplit("[", 1)[-1].rstrip("]") for line in errors] == [c for _, c in MISTAKES]
