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

# What each layer of the server may import from contextd itself; dependencies point one
# way (api -> app -> core/store/providers), core depends on nothing, the store's copy tool
# (``contextd store copy``) on the store alone, the web port only forwards to the native
# one, and config (the settings) is a leaf anyone above may read; metrics (what the layers
# record into) and tracing (the spans they start) are leaves every layer but core and web
# may use; the host protocols (OpenAI's HTTP API, MCP) sit at the top beside api/ and web/
# and reach the server only through the native API. core is pure code every layer may
# use: the web port and the host protocols for how a value a caller sent is shown.
ALLOWED_IMPORTS = {
    "core": {"core"},
    "metrics": {"metrics", "core"},
    "tracing": {"tracing", "core"},
    "store": {"store", "core", "metrics", "tracing"},
    "store_copy": {"store_copy", "store", "core"},
    "providers": {"providers", "core", "metrics", "tracing"},
    "app": {"app", "core", "store", "providers", "config", "metrics", "tracing"},
    "api": {"api", "app", "core", "store", "providers", "config", "v1", "metrics", "tracing"},
    "web": {"web", "core"},
    # The host protocols translate to the native API, as the web port does.
    "chat_http": {"chat_http", "web", "v1", "core"},
    "openai_http": {"openai_http", "chat_http", "web", "v1", "core"},
    "anthropic_http": {"anthropic_http", "chat_http", "web", "v1", "core"},
    "mcp_server": {"mcp_server", "v1", "core"},
}

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


def contextd_imports(path: Path) -> set[str]:
    """The contextd subpackages a module imports (``contextd.app.chat`` -> ``app``)."""
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
                names.add(parts[1])
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED_IMPORTS))
def test_imports_point_one_way(layer: str) -> None:
    wrong = {
        str(path.relative_to(SERVER)): sorted(contextd_imports(path) - ALLOWED_IMPORTS[layer])
        for path in python_modules(f"server/contextd/{layer}")
    }
    assert {module: names for module, names in wrong.items() if names} == {}


def test_the_import_check_sees_upward_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import contextd.api.errors\nfrom contextd.app import chat\nimport os\n")
    assert contextd_imports(module) == {"api", "app"}


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_modules("server", "clients", "tests", "bench", "scripts", "examples")
    }
    assert sizes, "no modules found"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


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
