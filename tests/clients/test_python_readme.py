"""Every ```python block of clients/python/README.md runs against a live server."""

from __future__ import annotations

import re

import pytest
from contextd_client import AsyncContextClient, ContextClient, cpb, mpb, pb, ppb, spb

from tests.support.paths import ROOT

README = ROOT / "clients" / "python" / "README.md"


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def readme_blocks() -> list[tuple[str, str]]:
    """(test id, code) per python block; the id names the section and the fence's line."""
    blocks: list[tuple[str, str]] = []
    section = "top"
    fence: str | None = None  # language of the open fence
    start = 0
    body: list[str] = []
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence, start, body = line[3:].strip(), number, []
            elif line.startswith("#"):
                section = _slug(line.lstrip("#"))
        elif line.startswith("```"):
            if fence == "python":
                # Blank lines first, so tracebacks point at the README's own line numbers.
                blocks.append((f"{section}-{start}", "\n" * start + "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"unclosed code fence at README.md line {start}"
    return blocks


BLOCKS = readme_blocks()


def _rpc_methods() -> list[str]:
    """Every RPC of every contextd service, as the client method name (snake case)."""
    modules = (pb, cpb, spb, mpb, ppb)
    return [
        re.sub(r"(?<!^)(?=[A-Z])", "_", method.name).lower()
        for module in modules
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]


def test_both_clients_have_a_method_per_rpc() -> None:
    methods = _rpc_methods()
    assert {"stream_chat", "collect", "append_messages", "delete_skill"} <= set(methods)
    for method in methods:
        assert callable(getattr(ContextClient, method, None)), method
        assert callable(getattr(AsyncContextClient, method, None)), method


def test_readme_has_an_example_per_rpc() -> None:
    code = "\n".join(c for _, c in BLOCKS)
    missing = [m for m in _rpc_methods() if f".{m}(" not in code]
    assert missing == []
    sections = [i for i, _ in BLOCKS]
    assert any(i.startswith("async-client") for i in sections)


@pytest.mark.parametrize("code", [c for _, c in BLOCKS], ids=[i for i, _ in BLOCKS])
def test_readme_example(code: str, address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTD_ADDRESS", address)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)
