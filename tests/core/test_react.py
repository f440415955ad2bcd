"""core.react: the ReAct tag protocol, parsed and described."""

from __future__ import annotations

import json

from contextd.core import react
from contextd.core.react import Action, Final, NoTags, ReactTool, parse_step


def test_final_with_thought() -> None:
    text = "<thought>I know this.</thought>\n<final> You like tea. </final>"
    assert parse_step(text) == Final("You like tea.")


def test_action_with_thought_and_whitespace() -> None:
    text = '  <thought>look it up</thought>\n<action tool="memory_search">\n coffee \n</action>\n'
    assert parse_step(text) == Action("memory_search", "coffee")


def test_action_attribute_quoting_and_case() -> None:
    assert parse_step("<ACTION tool='read'>x</ACTION>") == Action("read", "x")
    assert parse_step("<action tool=read>x</action>") == Action("read", "x")
    assert parse_step('<action  tool = "read" >x</action>') == Action("read", "x")


def test_missing_closing_tags_at_the_end() -> None:
    assert parse_step('<action tool="get_weather">{"city": "Paris"}') == Action(
        "get_weather", '{"city": "Paris"}'
    )
    assert parse_step("<thought>ok</thought><final>The answer is 4") == Final("The answer is 4")


def test_first_action_wins() -> None:
    text = (
        '<action tool="a">one</action><action tool="b">two</action>'
        "<observation>made up</observation><final>made up too</final>"
    )
    assert parse_step(text) == Action("a", "one")


def test_action_ends_at_a_hallucinated_observation() -> None:
    text = '<action tool="a">one<observation>fake</observation>'
    assert parse_step(text) == Action("a", "one")


def test_final_before_action_is_final() -> None:
    assert parse_step('<final>done</final><action tool="a">x</action>') == Final("done")


def test_tags_inside_thought_are_ignored() -> None:
    text = '<thought>maybe <action tool="a">x</action></thought><final>no tool</final>'
    assert parse_step(text) == Final("no tool")
    # An unclosed thought runs to the end.
    assert parse_step('<thought>hmm <action tool="a">x</action>') == NoTags("")


def test_no_tags_is_the_text_without_thoughts() -> None:
    assert parse_step("<thought>t</thought>\n  Just an answer.  ") == NoTags("Just an answer.")
    assert parse_step("plain") == NoTags("plain")


def test_action_without_a_tool_name() -> None:
    assert parse_step("<action>x</action>") == Action("", "x")


def test_addendum_lists_tools_and_protocol() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    text = react.addendum([ReactTool("get_weather", "Weather for a city", schema)])
    assert text.startswith(react.REACT_HEADER)
    assert "- get_weather: Weather for a city" in text
    assert json.dumps(schema, separators=(",", ":")) in text
    for tag in ('<action tool="TOOL_NAME">', "<final>", "<observation>", "<thought>"):
        assert tag in text
    assert "one" in text.lower()


def test_observation_and_unknown_tool() -> None:
    assert react.observation("- fact") == "<observation>- fact</observation>"
    message = react.unknown_tool("nope", ["memory_search"])
    assert "'nope' does not exist" in message and "memory_search" in message


def test_tool_arguments() -> None:
    assert json.loads(react.tool_arguments('{"city": "Paris"}')) == {"city": "Paris"}
    assert json.loads(react.tool_arguments("Paris")) == {"input": "Paris"}
    assert json.loads(react.tool_arguments("[1, 2]")) == {"input": "[1, 2]"}


def test_query_of() -> None:
    assert react.query_of("coffee") == "coffee"
    assert react.query_of('{"query": "coffee"}') == "coffee"
    assert react.query_of('"coffee"') == '"coffee"'
