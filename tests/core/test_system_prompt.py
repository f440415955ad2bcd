"""{{variable}} placeholders: filling them, and reporting the missing ones."""

from __future__ import annotations

import pytest
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.system_prompt import MissingVariables, placeholders, render


def test_placeholders_in_order_of_first_use() -> None:
    assert placeholders("{{b}} {{ a }} {{b}}") == ["b", "a"]


def test_render_fills_known_and_keeps_unknown() -> None:
    missing = MissingVariables()
    text = render("Sheet {{sheet}} of {{book}}", {"sheet": "S"}, missing, "the template")
    assert text == "Sheet S of {{book}}"
    v = Violations()
    missing.report(v, "session.variables")
    with pytest.raises(InvalidArgument) as err:
        v.raise_if_any()
    [violation] = err.value.violations
    assert violation.field == "session.variables.book"
    assert violation.description == "no value; needed by the template"


def test_one_violation_per_variable_naming_every_text_that_needs_it() -> None:
    missing = MissingVariables()
    render("{{sheet}} and {{sheet}}", {}, missing, "the template")
    render("Use {{sheet}} with {{lang}}.", {}, missing, "skill 'sumif'")
    render("{{sheet}}", {}, missing, "skill 'charts'")
    v = Violations()
    missing.report(v, "session.variables")
    with pytest.raises(InvalidArgument) as err:
        v.raise_if_any()
    assert [(x.field, x.description) for x in err.value.violations] == [
        (
            "session.variables.sheet",
            "no value; needed by the template, skill 'sumif' and skill 'charts'",
        ),
        ("session.variables.lang", "no value; needed by skill 'sumif'"),
    ]


def test_nothing_missing_reports_nothing() -> None:
    missing = MissingVariables()
    render("{{a}}", {"a": "1"}, missing, "the template")
    v = Violations()
    missing.report(v, "session.variables")
    assert not v
