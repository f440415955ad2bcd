"""Fixtures of the Messages API tests: one contextd per module with the web port and
--anthropic-api on, its model the rule-following OpenAI-compatible fake
(tests.support.fake_openai_model), with --auth none; one with --auth api-key and
keys of two users; and one with an Anthropic model behind both model APIs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.openai_http.conftest import MAX_MESSAGE, ORIGIN, Keyed, Served
from tests.support.fake_anthropic_model import ClaudeRules, claude_rules
from tests.support.fake_openai_model import RuleModel, rule_model
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.grpc_web import web_address
from tests.support.keyed_server import keyed_server
from tests.support.model_server import model_server
from tests.support.server import ServerProcess

MODEL = "fake-model"
VERSION = {"anthropic-version": "2023-06-01"}


def anthropic_args(model: RuleModel) -> tuple[str, ...]:
    return (
        *("--web-port", "0", "--anthropic-api"),
        *("--provider", "openai", "--provider-base-url", model.url),
        *("--provider-model", MODEL, "--provider-timeout", "10"),
        *("--max-message-bytes", str(MAX_MESSAGE), "--cors-origins", ORIGIN),
    )


def base_url(served: Served) -> str:
    """The SDKs' base URL: they add /v1/messages."""
    return f"http://{web_address(served.proc)}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with (
        rule_model() as model,
        model_server(
            tmp_path_factory.mktemp("anthropic-http"),
            anthropic_args(model),
            {"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        ) as proc,
    ):
        yield Served(proc, model)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keyed]:
    with (
        rule_model() as model,
        keyed_server(tmp_path_factory.mktemp("anthropic-keyed"), *anthropic_args(model)) as server,
    ):
        yield Keyed(server, model)


def keyed_url(keyed: Keyed) -> str:
    return f"http://{web_address(keyed.server.proc)}"


@dataclass(frozen=True)
class ClaudeServed:
    proc: ServerProcess
    model: ClaudeRules

    @property
    def base_url(self) -> str:
        return f"http://{web_address(self.proc)}"


@pytest.fixture(scope="module")
def claude_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClaudeServed]:
    """Both model APIs on the web port, an Anthropic model behind them."""
    with (
        claude_rules() as model,
        model_server(
            tmp_path_factory.mktemp("anthropic-provider"),
            (
                *("--web-port", "0", "--anthropic-api", "--openai-api"),
                *("--provider", "anthropic", "--provider-base-url", model.url),
                *("--provider-model", "claude-fake", "--provider-timeout", "10"),
            ),
            {"CONTEXTD_ANTHROPIC_API_KEY": FAKE_KEY},
        ) as proc,
    ):
        yield ClaudeServed(proc, model)
