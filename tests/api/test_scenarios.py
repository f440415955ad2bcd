"""The acceptance scenarios of the budget rule, the prompt layers and the message pipeline,
through a real server on a free port, via the Python SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from contextd_client import ContextClient, ContextdError

from tests.support import scenarios
from tests.support.bad_cases import BAD_BUILD


@pytest.fixture(scope="module")
def client(address: str) -> Iterator[ContextClient]:
    with ContextClient(address) as c:
        yield c


def build(client: ContextClient, request: dict[str, Any]) -> Any:
    request = dict(request)
    return client.build_messages(request.pop("user_message", ""), **request)


@pytest.mark.parametrize("case", scenarios.BUILD_CASES, ids=lambda c: c.name)
def test_build_cases(client: ContextClient, case: scenarios.BuildCase) -> None:
    result = build(client, case.request)
    case.check(result.messages, result.report)


def test_estimates(client: ContextClient) -> None:
    texts = [text for text, _ in scenarios.ESTIMATES]
    counts = client.count_tokens(texts, tokenizer="estimate")
    assert counts.text_tokens == [tokens for _, tokens in scenarios.ESTIMATES]


def test_required_over_budget_can_fail(client: ContextClient) -> None:
    with pytest.raises(ContextdError) as err:
        build(client, {**scenarios.BUDGET_CASES[4].request, "on_overflow": "fail"})
    assert err.value.code.name == "FAILED_PRECONDITION"


def test_prompt_all_layers_in_order(client: ContextClient) -> None:
    scenarios.check_prompt_all_layers(client.assemble_prompt(**scenarios.LAYERS_ALL).system_prompt)


@pytest.mark.parametrize("layers", [scenarios.LAYERS_IDENTITY_ONLY, scenarios.LAYERS_BLANKS])
def test_prompt_blank_layers_skipped(client: ContextClient, layers: dict[str, str]) -> None:
    result = client.assemble_prompt(**layers)
    scenarios.check_prompt_identity_only(result.system_prompt)
    assert [x.name for x in result.layers if x.included] == ["identity"]


def test_anthropic_adapter_on_the_pipeline_example(client: ContextClient) -> None:
    result = build(client, {**scenarios.PIPELINE_CASES[0].request, "output_format": "anthropic"})
    assert result.payload["system"].endswith("用户执行了 ls 命令，查看了目录内容")
    assert [m["role"] for m in result.payload["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize(("name", "request_", "fields"), BAD_BUILD, ids=[c[0] for c in BAD_BUILD])
def test_bad_input_names_fields(
    client: ContextClient, name: str, request_: dict[str, Any], fields: list[str]
) -> None:
    with pytest.raises(ContextdError) as err:
        build(client, request_)
    assert err.value.code.name == "INVALID_ARGUMENT"
    assert err.value.fields == fields
