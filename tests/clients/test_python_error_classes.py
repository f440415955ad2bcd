"""The Python SDK raises a ContextdError subclass per status code, named by its own StatusCode."""

from __future__ import annotations

import pickle

import contextd_client
import grpc
import pytest
from contextd_client import (
    ERROR_CLASSES,
    AsyncContextClient,
    CancelledError,
    ContextClient,
    ContextdError,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    InvalidResponseError,
    NotFoundError,
    StatusCode,
    UnavailableError,
)

from tests.support.sdk import expect_error, free_port


def test_status_code_matches_grpc_names_and_numbers() -> None:
    assert {c.name: c.value for c in StatusCode} == {c.name: c.value[0] for c in grpc.StatusCode}
    for code in StatusCode:
        assert code.grpc_code.name == code.name


def test_every_error_status_has_an_exported_class() -> None:
    assert set(ERROR_CLASSES) == set(StatusCode) - {StatusCode.OK}
    for code, cls in ERROR_CLASSES.items():
        assert issubclass(cls, ContextdError)
        assert cls.__name__ in contextd_client.__all__
        assert getattr(contextd_client, cls.__name__) is cls
        assert code.name.replace("_", "") == cls.__name__.removesuffix("Error").upper()
    assert issubclass(InvalidResponseError, InternalError)


def test_invalid_argument_carries_its_field_violations(client: ContextClient) -> None:
    error = expect_error(lambda: client.build_messages("Hi", token_budget=0))
    assert isinstance(error, InvalidArgumentError)
    assert error.status_code is StatusCode.INVALID_ARGUMENT
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT  # still a grpc.StatusCode
    assert error.field_violations == [
        FieldViolation("token_budget", "must be a positive number of tokens")
    ]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidArgumentError and copy.field_violations == error.violations


def test_not_found_also_for_another_users_session(client: ContextClient) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.get_session("ada", "0" * 32)
    assert missing.value.status_code is StatusCode.NOT_FOUND
    session = client.create_session("ada")
    with pytest.raises(NotFoundError) as theirs:
        client.get_session("intruder", session["id"])
    assert theirs.value.status_code is StatusCode.NOT_FOUND
    with pytest.raises(NotFoundError):
        client.stream_chat("hi", user_id="intruder", session_id=session["id"]).result()


def test_failed_precondition(client: ContextClient) -> None:
    with pytest.raises(FailedPreconditionError) as error:
        client.build_messages(
            "Hello there", system_prompt="Be brief.", token_budget=3, on_overflow="fail"
        )
    assert error.value.status_code is StatusCode.FAILED_PRECONDITION


def test_cancelled_turn(client: ContextClient) -> None:
    stream = client.stream_chat("hi", user_id="ada")
    stream.cancel()
    with pytest.raises(CancelledError) as error:
        stream.result()
    assert error.value.code == grpc.StatusCode.CANCELLED


def test_refused_connection_is_unavailable() -> None:
    closed = ContextClient(f"127.0.0.1:{free_port()}", timeout=5)
    with closed, pytest.raises(UnavailableError) as error:
        closed.list_tokenizers()
    assert error.value.status_code is StatusCode.UNAVAILABLE


async def test_async_client_raises_the_same_classes(aclient: AsyncContextClient) -> None:
    with pytest.raises(NotFoundError):
        await aclient.get_session("ada", "0" * 32)
    with pytest.raises(InvalidArgumentError) as error:
        await aclient.build_messages("Hi", token_budget=0)
    assert error.value.fields == ["token_budget"]


def test_errors_built_by_hand_take_either_code() -> None:
    ours = NotFoundError(StatusCode.NOT_FOUND, "gone")
    theirs = ContextdError(grpc.StatusCode.NOT_FOUND, "gone")
    assert (ours.code, ours.status_code) == (theirs.code, theirs.status_code)
    assert str(ours) == str(theirs) == "NOT_FOUND: gone"
