"""The code's shape stays as docs/development.md describes it: imports point one way,
modules stay small, and the code speaks of its own behaviour."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SERVER = ROOT / "server" / "contextd"
MAX_LINES = 600

# What each room of the server may import from contextd itself; dependencies point one
# way (fronts -> app -> core/store/providers), core depends on nothing, the store's copy
# tool (``contextd store copy``) on the store alone, and config (the settings) is a leaf
# anyone above may read; metrics (what the layers record into) and tracing (the spans
# they start) are leaves every layer but core and the translating fronts may use. The
# fronts are siblings: gRPC (the native API) calls the app and reaches the store only
# through it; the web port, OpenAI's HTTP API and MCP translate to native calls (the
# OpenAI API is served on the web port) and reach the server only through them. core is
# pure code every layer may use: the fronts for how a value a caller sent is shown. The
# composition root builds every part and starts every listener; the commands sit on top.
ALLOWED_IMPORTS = {
    "core": {"core"},
    "metrics": {"metrics", "core"},
    "tracing": {"tracing", "core"},
    "store": {"store", "core", "metrics", "tracing"},
    "store_copy": {"store_copy", "store", "core"},
    "providers": {"providers", "core", "metrics", "tracing"},
    "app": {"app", "core", "store", "providers", "config", "metrics", "tracing"},
    "fronts": {"fronts", "core"},
    "fronts/grpc": {"fronts/grpc", "fronts", "app", "core", "config", "v1", "metrics", "tracing"},
    "fronts/web": {"fronts/web", "fronts", "core"},
    # The model APIs share chat_http, which speaks to the native API as the web port does
    # (a turn's StreamChat called in process, through fronts/native.py).
    "fronts/chat_http": {"fronts/chat_http", "fronts/web", "fronts", "v1", "core"},
    "fronts/openai": {"fronts/openai", "fronts/chat_http", "fronts/web", "fronts", "v1", "core"},
    "fronts/anthropic": {
        "fronts/anthropic",
        "fronts/chat_http",
        "fronts/web",
        "fronts",
        "v1",
        "core",
    },
    "fronts/mcp": {"fronts/mcp", "fronts", "v1", "core"},
    "root": {
        "root",
        *("fronts", "fronts/grpc", "fronts/web", "fronts/openai", "fronts/anthropic"),
        "fronts/mcp",
        *("app", "core", "store", "providers", "config", "metrics", "tracing", "v1"),
    },
    "commands": {"commands", "root", "fronts/mcp", "config", "core", "store", "store_copy"},
    "config": set(),
}
# What may stand loose at the top of the package, beside the rooms.
LOOSE = {"__init__.py", "__main__.py", "config.py"}

GENERATED = ("server/contextd/v1/", "clients/python/src/contextd_client/_pb/")
BUILT = {"node_modules", "dist", "gen", ".venv", "__pycache__"}


def python_modules(*folders: str) -> list[Path]:
    found = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    return [
        p
        for p in found
        if not BUILT & set(p.relative_to(ROOT).parts)
        and not str(p.relative_to(ROOT)).startswith(GENERATED)
    ]


def room_of(parts: list[str]) -> str:
    """The room of a module path under contextd (``["fronts", "grpc", "auth"]`` ->
    ``fronts/grpc``; ``["app", "chat"]`` -> ``app``)."""
    if len(parts) > 1 and "/".join(parts[:2]) in ALLOWED_IMPORTS:
        return "/".join(parts[:2])
    return parts[0]


def contextd_imports(path: Path) -> set[str]:
    """The rooms of contextd a module imports (``contextd.app.chat`` -> ``app``,
    ``contextd.fronts.web.gateway`` -> ``fronts/web``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "contextd" and len(parts) > 1:
                names.add(room_of(parts[1:]))
    return names


def room_modules(room: str) -> list[Path]:
    """The modules of ``room``, a folder or a loose module, without its inner rooms."""
    if (SERVER / f"{room}.py").is_file():
        return [SERVER / f"{room}.py"]
    return [
        path
        for path in python_modules(f"server/contextd/{room}")
        if room_of(list(path.relative_to(SERVER).with_suffix("").parts)) == room
    ]


@pytest.mark.parametrize("room", sorted(ALLOWED_IMPORTS))
def test_imports_point_one_way(room: str) -> None:
    modules = room_modules(room)
    assert modules, f"{room} has no modules"
    wrong = {
        str(path.relative_to(SERVER)): sorted(contextd_imports(path) - ALLOWED_IMPORTS[room])
        for path in modules
    }
    assert {module: names for module, names in wrong.items() if names} == {}


def test_every_module_is_in_a_room() -> None:
    roomless = [
        str(path.relative_to(SERVER))
        for path in python_modules("server/contextd")
        if (path.parent == SERVER and path.name not in LOOSE)
        or (path.parent != SERVER and path.relative_to(SERVER).parts[0] not in ALLOWED_IMPORTS)
    ]
    assert roomless == []


def test_the_import_check_sees_upward_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import contextd.fronts.grpc.errors\nfrom contextd.app import chat\n"
        "from contextd.fronts import web\nimport os\n"
    )
    assert contextd_imports(module) == {"fronts/grpc", "app", "fronts"}


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_modules("server", "clients", "tests", "bench", "scripts", "examples")
    }
    assert sizes, "no modules found"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


# A chat turn's modules each hold one phase or part of it: none grows to hold several.
CHAT_MAX_LINES = 250


def test_the_chat_turn_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(SERVER)): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_modules("server/contextd/app/chat")
    }
    assert len(sizes) > 10, "the chat package was not found"
    assert {name: n for name, n in sizes.items() if n > CHAT_MAX_LINES} == {}


# Documents the code once referred to by number; the code describes behaviour instead.
OUTSIDE_REFERENCE = re.compile(r"seed[ _]?0\d\d|seeds? \d{3}", re.IGNORECASE)


def test_code_speaks_of_its_own_behaviour() -> None:
    texts = [
        path
        for folder in ("server", "clients", "tests", "protos", "docs", "bench", "examples")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix in {".py", ".ts", ".cs", ".vb", ".proto", ".md", ".sql", ".pyi"}
        and not BUILT & set(path.relative_to(ROOT).parts)
    ]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in texts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_REFERENCE.search(line) and path != Path(__file__)
    ]
    assert found == []
