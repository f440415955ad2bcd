"""The Python examples of docs/openai.md run as written against a live /v1."""

from __future__ import annotations

import re

import pytest

from tests.openai_http.conftest import Served
from tests.support.grpc_web import web_address
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "openai.md"
DOCUMENTED = "127.0.0.1:50152"


def test_the_python_examples_run(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 3, "the page's examples: the first turn, a session, responses"
    code = "\n".join(blocks).replace(DOCUMENTED, web_address(served.proc))
    scope: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, str(PAGE), "exec"), scope)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "fake answer to: Which city has the best food, Lisbon or Porto?"
    assert "history_kept" in printed[1]
    second = scope["second"]
    assert second.model_extra["contextd"]["turn_index"] == 2  # type: ignore[attr-defined]
    assert printed[2] == "fake answer to: Plan a day in Porto."
    later = scope["later"]
    assert later.output_text == "fake answer to: And in the evening?"  # type: ignore[attr-defined]
    assert later.model_extra["contextd"]["mode"] == "session"  # type: ignore[attr-defined]
