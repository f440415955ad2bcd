"""Walk the two requests hosts send most through the server's code, and count the path.

Starts a contextd server in this process (SQLite in a temporary directory, the echo
model), stores a session with some history, then traces one session-mode
``BuildMessages`` and one ``StreamChat`` turn with ``sys.setprofile``. Only frames in
``server/contextd`` count, in the request's own task (work it schedules into other
tasks, such as what runs after a turn, is left out); left out too are the generated code
under ``v1/`` and the cross-cutting modules every call passes whatever it asks (the guard
interceptor with its request parsing and audit line, tracing, metrics). For each request it prints:

- files: the distinct modules of the server in which code ran;
- steps: the distinct calls from a function in one module to a function in another
  (a call repeated per message or per delta counts once);
- climbs: the steps back up, where code calls into a module that depends on it: a
  higher layer (core or store calling back into app, app into a front), or a module that
  imports the caller's module, directly or through others (a callback handed down).

Layers, lowest first: core; store, providers, metrics, tracing; app; the fronts and the
composition root. ``--list`` prints the steps and marks the climbs.

    .venv/bin/python scripts/walk_request.py [--list]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import functools
import sys
import tempfile
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from contextd.config import Settings
from contextd.root.server import start
from contextd.v1 import (
    chat_pb2,
    chat_pb2_grpc,
    context_pb2,
    context_pb2_grpc,
    sessions_pb2,
    sessions_pb2_grpc,
)

PACKAGE = Path(sys.modules["contextd"].__file__ or "").resolve().parent
GENERATED = PACKAGE / "v1"
CROSS_CUTTING = (
    "fronts/grpc/interceptors.py",
    "fronts/grpc/request_parsing.py",
    "fronts/grpc/audit.py",
    "tracing/",
    "metrics/",
)

# Higher numbers sit higher: a call to a higher layer than the caller's is a climb.
LAYERS = {"core": 0, "store": 1, "providers": 1, "metrics": 1, "tracing": 1, "app": 2}
TOP = 3  # the fronts, the composition root, the commands and config.py


@functools.cache
def server_module(path: str) -> str | None:
    """The module's path under the package, or None for code outside the server."""
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(PACKAGE) or resolved.is_relative_to(GENERATED):
        return None
    return str(resolved.relative_to(PACKAGE))


def module_of(path: str) -> str | None:
    """The module's path under the package, or None for code outside the request's path."""
    module = server_module(path)
    return None if module is None or module.startswith(CROSS_CUTTING) else module


def layer_of(module: str) -> int:
    head = module.split("/", 1)[0]
    return LAYERS.get(head, TOP) if "/" in module else TOP


@functools.cache
def imports_of(module: str) -> frozenset[str]:
    """The server modules ``module`` imports, directly or through others."""
    found: set[str] = set()
    todo = [module]
    while todo:
        tree = ast.parse((PACKAGE / todo.pop()).read_text())
        for node in ast.walk(tree):
            names = []
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("contextd")
            ):
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                for candidate in (
                    name.replace(".", "/") + ".py",
                    name.replace(".", "/") + "/__init__.py",
                ):
                    relative = candidate.removeprefix("contextd/")
                    known = candidate.startswith("contextd/") and (PACKAGE / relative).is_file()
                    if known and relative not in found:
                        found.add(relative)
                        todo.append(relative)
    return frozenset(found)


def is_climb(caller: str, callee: str) -> bool:
    if layer_of(caller) != layer_of(callee):
        return layer_of(caller) < layer_of(callee)
    return caller in imports_of(callee)


@dataclass
class Walk:
    files: list[str] = field(default_factory=list)
    steps: list[tuple[str, str]] = field(default_factory=list)
    _seen_steps: set[tuple[str, str]] = field(default_factory=set)
    task: asyncio.Task[Any] | None = None

    @property
    def climbs(self) -> list[tuple[str, str]]:
        return [
            (caller, callee)
            for caller, callee in self.steps
            if is_climb(caller.split(":")[0], callee.split(":")[0])
        ]

    def profile(self, frame: types.FrameType, event: str, _arg: object) -> None:
        if event != "call" or server_module(frame.f_code.co_filename) is None:
            return
        # The request's own task: the first the server's code runs in once tracing is on.
        # Work it schedules in other tasks (after a turn, in the background) is not its path.
        task = asyncio.current_task()
        if self.task is None:
            self.task = task
        if task is not self.task:
            return
        callee = module_of(frame.f_code.co_filename)
        if callee is None:
            return
        if callee not in self.files:
            self.files.append(callee)
        caller_frame = frame.f_back
        while caller_frame is not None and module_of(caller_frame.f_code.co_filename) is None:
            caller_frame = caller_frame.f_back
        if caller_frame is None:
            return
        caller = module_of(caller_frame.f_code.co_filename)
        if caller is None or caller == callee:
            return
        step = (
            f"{caller}:{caller_frame.f_code.co_qualname}",
            f"{callee}:{frame.f_code.co_qualname}",
        )
        if step not in self._seen_steps:
            self._seen_steps.add(step)
            self.steps.append(step)


async def traced(call: Callable[[], Awaitable[Any]]) -> Walk:
    walk = Walk()
    sys.setprofile(walk.profile)
    try:
        await call()
    finally:
        sys.setprofile(None)
    return walk


async def main(show: bool) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(port=0, data_dir=Path(data_dir), web_port=-1)
        running = await start(settings)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                walks = await _walk_both(channel)
        finally:
            await running.stop(0)
    for name, walk in walks.items():
        climbs = walk.climbs
        print(f"{name}: {len(walk.files)} files, {len(walk.steps)} steps, {len(climbs)} climbs")
        if show:
            print("  files: " + ", ".join(walk.files))
            for caller, callee in walk.steps:
                mark = "^" if (caller, callee) in climbs else " "
                print(f"  {mark} {caller} -> {callee}")


async def _walk_both(channel: grpc.aio.Channel) -> dict[str, Walk]:
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    context = context_pb2_grpc.ContextServiceStub(channel)
    chat = chat_pb2_grpc.ChatServiceStub(channel)
    created = await sessions.CreateSession(
        sessions_pb2.CreateSessionRequest(user_id="walker", title="walk")
    )
    session_id = created.session.id
    history = [
        context_pb2.Message(role=role, content=f"message {n} of the stored history")
        for n in range(20)
        for role in [context_pb2.ROLE_USER if n % 2 == 0 else context_pb2.ROLE_ASSISTANT]
    ]
    await sessions.AppendMessages(
        sessions_pb2.AppendMessagesRequest(
            user_id="walker", session_id=session_id, messages=history
        )
    )
    session = context_pb2.SessionContext(user_id="walker", session_id=session_id)

    async def build() -> None:
        await context.BuildMessages(
            context_pb2.BuildMessagesRequest(
                session=session, user_message="What did we say?", token_budget=4000
            )
        )

    async def turn() -> None:
        async for _event in chat.StreamChat(
            chat_pb2.StreamChatRequest(session=session, user_message="Tell me more.")
        ):
            pass

    # Once untraced, so that start-up work (first use of caches, imports) is not walked.
    await build()
    await turn()
    return {"session BuildMessages": await traced(build), "StreamChat": await traced(turn)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every step")
    asyncio.run(main(parser.parse_args().list))
