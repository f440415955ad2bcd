"""DeleteUser over a real server in this process and its SQLite file: everything of the
user goes, in one transaction, files after the commit; nothing of anyone else moves; a
second call finds nothing; bad requests delete nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
import grpc.aio
import pytest
from contextd.store.event_log import removals as log_removals
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import users_pb2 as upb

from tests.support.erasure import (
    FACT,
    GatedProvider,
    InProcess,
    fill,
    in_process,
    settle,
    user_rows,
)
from tests.support.pg_databases import database_url_for
from tests.support.settings import terms_only

EMPTY = {
    "sessions": [],
    "conversation": [],
    "message_tokens": [],
    "compression_summaries": [],
    "session_summaries": [],
    "memories": [],
    "memory_history": [],
    "api_keys": [],
    "memories_fts": [],
}


def delete(user: str, confirm: str | None = None) -> upb.DeleteUserRequest:
    return upb.DeleteUserRequest(user_id=user, confirm_user_id=user if confirm is None else confirm)


def logs(live: InProcess) -> set[str]:
    return {path.stem for path in live.history.iterdir()}


@pytest.mark.both_backends
async def test_everything_of_the_user_goes_and_nothing_else(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    settings = terms_only(
        port=0, data_dir=tmp_path, database_url=database_url_for(request, backend)
    )
    async with in_process(settings, GatedProvider()) as live:
        alice = await fill(live.stubs, "alice")
        bob = await fill(live.stubs, "bob")
        await settle()
        before = await user_rows(live.db, "alice")
        assert all(before[table] for table in EMPTY if table != "api_keys"), before
        assert set(alice) | set(bob) <= await live.logged_sessions()
        bobs = await user_rows(live.db, "bob")

        erased = await live.stubs.users.DeleteUser(delete("alice"))

        assert erased == upb.DeleteUserResponse(
            sessions=2,
            messages=len(before["conversation"]),
            summaries=len(before["compression_summaries"]) + len(before["session_summaries"]),
            memories=len(before["memories"]),
            memory_history=len(before["memory_history"]),
            event_logs=2,
            api_keys=0,
        )
        await settle()
        assert await user_rows(live.db, "alice") == EMPTY
        assert await user_rows(live.db, "bob") == bobs
        assert await live.logged_sessions() == set(bob)
        assert list((tmp_path / "log-removals").iterdir()) == []
        for session_id in alice:
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await live.stubs.sessions.GetSession(
                    spb.GetSessionRequest(user_id="alice", session_id=session_id)
                )
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        found = await live.stubs.memories.SearchMemories(
            mpb.SearchMemoriesRequest(user_id="alice", query="green tea Paris")
        )
        assert list(found.results) == []

        # Idempotent: the second call succeeds with nothing left to delete.
        assert await live.stubs.users.DeleteUser(delete("alice")) == upb.DeleteUserResponse()

        # The user id can start again from nothing.
        again = await live.stubs.memories.AddMemory(
            mpb.AddMemoryRequest(user_id="alice", content="alice lives in Paris")
        )
        assert again.created


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (upb.DeleteUserRequest(user_id="alice"), "confirm_user_id"),
        (upb.DeleteUserRequest(user_id="alice", confirm_user_id="bob"), "confirm_user_id"),
        (upb.DeleteUserRequest(user_id="alice", confirm_user_id="Alice"), "confirm_user_id"),
        (upb.DeleteUserRequest(user_id="alice", confirm_user_id=" alice"), "confirm_user_id"),
        (upb.DeleteUserRequest(), "user_id"),
        (upb.DeleteUserRequest(confirm_user_id="alice"), "user_id"),
        (upb.DeleteUserRequest(user_id="al ice", confirm_user_id="al ice"), "user_id"),
        (upb.DeleteUserRequest(user_id="a" * 129, confirm_user_id="a" * 129), "user_id"),
    ],
)
async def test_a_bad_request_deletes_nothing(
    tmp_path: Path, request_: upb.DeleteUserRequest, field: str
) -> None:
    async with in_process(terms_only(port=0, data_dir=tmp_path), GatedProvider()) as live:
        alice = await fill(live.stubs, "alice")
        await settle()
        before = await user_rows(live.db, "alice")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await live.stubs.users.DeleteUser(request_)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in (refused.value.details() or "")
        assert await user_rows(live.db, "alice") == before
        assert set(alice) <= logs(live)


async def test_a_turn_streaming_while_its_user_is_deleted_ends_not_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = GatedProvider()
    async with in_process(terms_only(port=0, data_dir=tmp_path), provider) as live:
        [session_id, _] = await fill(live.stubs, "alice")
        await settle()
        provider.turn_gate.clear()
        call = live.stubs.chat.StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="alice", session_id=session_id),
                user_message="a question the user will not see answered",
            )
        )
        events = []
        with caplog.at_level(logging.INFO, "contextd.rpc"):
            async for event in call:
                events.append(event.WhichOneof("event"))
                if events[-1] == "text_delta":
                    break
            await provider.turn_streaming.wait()
            erased = await live.stubs.users.DeleteUser(delete("alice"))
            provider.turn_gate.set()
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async for event in call:
                    events.append(event.WhichOneof("event"))
        assert erased.sessions == 2
        assert ended.value.code() == grpc.StatusCode.NOT_FOUND
        assert session_id in (ended.value.details() or "")
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        await settle()
        assert await user_rows(live.db, "alice") == EMPTY
        assert logs(live) == set()  # the turn's later events left no log behind


async def test_after_turn_work_of_a_deleted_user_writes_no_memory(tmp_path: Path) -> None:
    provider = GatedProvider()
    async with in_process(terms_only(port=0, data_dir=tmp_path), provider) as live:
        created = await live.stubs.sessions.CreateSession(spb.CreateSessionRequest(user_id="alice"))
        provider.after_turn_gate.clear()
        turn = [
            event
            async for event in live.stubs.chat.StreamChat(
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="alice", session_id=created.session.id),
                    user_message="I drink green tea",
                )
            )
        ]
        assert turn[-1].turn_completed.status == cpb.TURN_STATUS_OK
        await provider.after_turn_waiting.wait()  # the memory extraction asked the model
        await live.stubs.users.DeleteUser(delete("alice"))
        provider.after_turn_gate.set()
        await settle(0.5)
        assert await user_rows(live.db, "alice") == EMPTY
        assert logs(live) == set()


async def test_after_turn_work_of_other_users_goes_on(tmp_path: Path) -> None:
    provider = GatedProvider()
    async with in_process(terms_only(port=0, data_dir=tmp_path), provider) as live:
        created = await live.stubs.sessions.CreateSession(spb.CreateSessionRequest(user_id="bob"))
        provider.after_turn_gate.clear()
        turn = [
            event
            async for event in live.stubs.chat.StreamChat(
                cpb.StreamChatRequest(
                    session=pb.SessionContext(user_id="bob", session_id=created.session.id),
                    user_message="I drink green tea",
                )
            )
        ]
        assert turn[-1].turn_completed.status == cpb.TURN_STATUS_OK
        await provider.after_turn_waiting.wait()
        await live.stubs.users.DeleteUser(delete("alice"))
        provider.after_turn_gate.set()
        await settle(0.5)
        memories = await live.stubs.memories.ListMemories(mpb.ListMemoriesRequest(user_id="bob"))
        assert [m.content for m in memories.memories] == [FACT]


async def test_a_crash_between_the_commit_and_the_files_is_finished_by_a_second_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(terms_only(port=0, data_dir=tmp_path), GatedProvider()) as live:
        alice = await fill(live.stubs, "alice")
        await settle()

        async def crash(self: log_removals.LogRemovals, note: object) -> int:
            raise RuntimeError("the process died here")

        with monkeypatch.context() as patched:
            patched.setattr(log_removals.LogRemovals, "finish", crash)
            with pytest.raises(grpc.aio.AioRpcError):
                await live.stubs.users.DeleteUser(delete("alice"))
        # Committed: no row is left, so none names a missing file; the files are left.
        assert await user_rows(live.db, "alice") == EMPTY
        assert set(alice) <= logs(live)

        assert await live.stubs.users.DeleteUser(delete("alice")) == upb.DeleteUserResponse()
        assert logs(live) == set()
        assert list((tmp_path / "log-removals").iterdir()) == []


async def test_a_rolled_back_erasure_keeps_every_row_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(terms_only(port=0, data_dir=tmp_path), GatedProvider()) as live:
        alice = await fill(live.stubs, "alice")
        await settle()
        before = await user_rows(live.db, "alice")
        real_note = log_removals.LogRemovals.note

        def note_then_fail(self: log_removals.LogRemovals, ids: list[str]) -> object:
            real_note(self, ids)
            raise OSError("disk full")

        with monkeypatch.context() as patched:
            patched.setattr(log_removals.LogRemovals, "note", note_then_fail)
            with pytest.raises(grpc.aio.AioRpcError):
                await live.stubs.users.DeleteUser(delete("alice"))
        assert await user_rows(live.db, "alice") == before
        # The note of the rolled-back transaction names sessions that still exist: the
        # next call's sweep keeps their logs (and then deletes them itself).
        erased = await live.stubs.users.DeleteUser(delete("alice"))
        assert erased.sessions == 2 and erased.event_logs == 2
        assert set(alice).isdisjoint(logs(live))
