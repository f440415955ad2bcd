"""Fixtures of the OpenAI-compatible API tests: one contextd per module with the web
port and --openai-api on, its model the rule-following fake (tests.support
.fake_openai_model), with --auth none; and one with --auth api-key and keys of two
users."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc

from tests.support.fake_openai_model import RuleModel, rule_model
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.grpc_web import web_address
from tests.support.keyed_server import KeyedServer, keyed_server
from tests.support.model_server import model_server
from tests.support.server import ServerProcess

MODEL = "fake-model"
MAX_MESSAGE = 1024 * 1024  # --max-message-bytes: an oversized body is cheap to send
ORIGIN = "https://app.example"  # the page origin --cors-origins allows


def openai_args(model: RuleModel) -> tuple[str, ...]:
    return (
        *("--web-port", "0", "--openai-api"),
        *("--provider", "openai", "--provider-base-url", model.url),
        *("--provider-model", MODEL, "--provider-timeout", "10"),
        *("--max-message-bytes", str(MAX_MESSAGE), "--cors-origins", ORIGIN),
    )


@dataclass(frozen=True)
class Served:
    proc: ServerProcess
    model: RuleModel

    @property
    def base_url(self) -> str:
        return f"http://{web_address(self.proc)}/v1"

    def sessions(self, user: str, metadata: tuple[tuple[str, str], ...] = ()) -> list[spb.Session]:
        """The user's stored sessions, read on the native port."""
        with grpc.insecure_channel(self.proc.address) as channel:
            stub = sessions_pb2_grpc.SessionServiceStub(channel)
            reply = stub.ListSessions(
                spb.ListSessionsRequest(user_id=user, page_size=200), metadata=metadata
            )
            return list(reply.sessions)

    def messages(self, user: str, session_id: str) -> list[spb.SessionMessage]:
        with grpc.insecure_channel(self.proc.address) as channel:
            stub = sessions_pb2_grpc.SessionServiceStub(channel)
            reply = stub.ListMessages(
                spb.ListMessagesRequest(user_id=user, session_id=session_id, page_size=500)
            )
            return list(reply.messages)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with (
        rule_model() as model,
        model_server(
            tmp_path_factory.mktemp("openai-http"),
            openai_args(model),
            {"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        ) as proc,
    ):
        yield Served(proc, model)


@dataclass(frozen=True)
class Keyed:
    server: KeyedServer
    model: RuleModel

    @property
    def base_url(self) -> str:
        return f"http://{web_address(self.server.proc)}/v1"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keyed]:
    with (
        rule_model() as model,
        keyed_server(tmp_path_factory.mktemp("openai-keyed"), *openai_args(model)) as server,
    ):
        yield Keyed(server, model)
