"""The anthropic SDK examples of docs/anthropic.md run as written against a live
/v1/messages (the Claude Agent SDK's needs the Claude Code program, which is not here)."""

from __future__ import annotations

import re

import pytest

from tests.anthropic_http.conftest import base_url
from tests.openai_http.conftest import Served
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "anthropic.md"
DOCUMENTED = "http://127.0.0.1:50152"


def test_the_python_examples_run(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    runnable = [b for b in blocks if "claude_agent_sdk" not in b]
    assert len(runnable) == 3, "the page's examples: a turn, a stream and a session, editing"
    assert len(blocks) == 4, "and the Claude Agent SDK's"
    code = "\n".join(runnable).replace(DOCUMENTED, base_url(served))
    scope: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, str(PAGE), "exec"), scope)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "fake answer to: Which city has the best food, Lisbon or Porto?"
    assert printed[1] == "0"  # no history: the system prompt and the question
    assert printed[2] == "fake answer to: I am vegetarian.fake answer to: Suggest a dinner."
    assert printed[3] == "[]"
    second = scope["second"]
    assert second.model_extra["contextd"]["turn_index"] == 2  # type: ignore[attr-defined]
