"""Every ```python block of clients/python/README.md runs against a live server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "clients" / "python" / "README.md"


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


def test_readme_has_an_example_per_rpc() -> None:
    code = "\n".join(c for _, c in BLOCKS)
    for method in ("assemble_prompt", "build_messages", "count_tokens", "list_tokenizers"):
        assert f".{method}(" in code, method


@pytest.mark.parametrize("code", [c for _, c in BLOCKS], ids=[i for i, _ in BLOCKS])
def test_readme_example(code: str, address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTD_ADDRESS", address)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)
