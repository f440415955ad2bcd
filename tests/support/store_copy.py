"""`contextd store copy` run as a command, and what a server shows of its data: the data
one server holds is filled through its API, read back the same way from the server on
the copy, and compared."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import grpc
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import (
    chat_pb2_grpc,
    context_pb2_grpc,
    memory_pb2_grpc,
    prompts_pb2_grpc,
    sessions_pb2_grpc,
)
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb

from tests.support.auth import bearer

# Queries each of which finds memories a filled store holds.
QUERIES = ("walrus", "spreadsheet pivot", "penguin", "budget")


def store_copy(source: str, target: str) -> subprocess.CompletedProcess[str]:
    """``contextd store copy --from SOURCE --to TARGET``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "contextd", "store", "copy", "--from", source, "--to", target],
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_counts(stdout: str) -> dict[str, tuple[int, int, int]]:
    """The printed counts: table -> (source, copied, target)."""
    counts = {}
    for line in stdout.splitlines()[1:]:
        found = re.fullmatch(r"(.+?)\s+(\d+)\s+(\d+)\s+(\d+)", line)
        assert found, line
        counts[found[1]] = (int(found[2]), int(found[3]), int(found[4]))
    return counts


class Client:
    """The stubs of one server, every call with one key."""

    def __init__(self, channel: grpc.Channel, token: str) -> None:
        self.auth = bearer(token)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.prompts = prompts_pb2_grpc.PromptServiceStub(channel)

    def turn(self, question: str, session_id: str = "") -> str:
        request = cpb.StreamChatRequest(
            session=pb.SessionContext(session_id=session_id, scenario="excel", host="excel"),
            user_message=question,
        )
        events = list(self.chat.StreamChat(request, metadata=self.auth))
        assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
        return str(events[0].turn_started.session_id)

    def fill(self, words: str) -> None:
        """Sessions with turns and appended messages, memories, a summary, a template
        and a skill of this key's user (and tenant)."""
        first = self.turn(f"how do I make a spreadsheet pivot about the {words}?")
        self.turn(f"and a chart of the {words} budget?", first)
        appended = self.sessions.CreateSession(
            spb.CreateSessionRequest(title=f"notes on {words}", metadata={"k": words}),
            metadata=self.auth,
        ).session.id
        self.sessions.AppendMessages(
            spb.AppendMessagesRequest(
                session_id=appended,
                messages=[
                    pb.Message(role=pb.ROLE_USER, content=f"remember the {words} please"),
                    pb.Message(role=pb.ROLE_ASSISTANT, content=f"noted: the {words}"),
                ],
            ),
            metadata=self.auth,
        )
        self.sessions.SetSessionSummary(
            spb.SetSessionSummaryRequest(session_id=appended, summary=f"all about {words}"),
            metadata=self.auth,
        )
        for content in (f"keeps a {words}", f"the {words} budget is tight", "likes a penguin"):
            self.memory.AddMemory(mpb.AddMemoryRequest(content=content), metadata=self.auth)
        self.prompts.UpsertTemplate(
            ppb.UpsertTemplateRequest(scenario="excel", system_prompt=f"{words} template"),
            metadata=self.auth,
        )
        self.prompts.UpsertSkill(
            ppb.UpsertSkillRequest(
                skill=ppb.Skill(name="charts", prompt=f"{words} charts", apps=["excel"])
            ),
            metadata=self.auth,
        )

    def shown(self) -> dict[str, Any]:
        """What the server shows this user: sessions, their messages and event logs (the
        exported JSON text, byte for byte), memory searches, templates and skills."""
        sessions = self.sessions.ListSessions(
            spb.ListSessionsRequest(page_size=200), metadata=self.auth
        )
        shown: dict[str, Any] = {"sessions": sessions.SerializeToString(deterministic=True)}
        for session in sessions.sessions:
            messages = self.sessions.ListMessages(
                spb.ListMessagesRequest(session_id=session.id, page_size=500), metadata=self.auth
            )
            shown[f"messages {session.id}"] = messages.SerializeToString(deterministic=True)
            exported = self.sessions.ExportEvents(
                spb.ExportEventsRequest(session_id=session.id), metadata=self.auth
            )
            shown[f"events {session.id}"] = "\n".join(chunk.json for chunk in exported)
        for query in QUERIES:
            found = self.memory.SearchMemories(
                mpb.SearchMemoriesRequest(query=query, limit=20), metadata=self.auth
            )
            # Scores follow the clock; what was found, and in which order, does not.
            shown[f"search {query}"] = [(r.memory.id, r.memory.content) for r in found.results]
        listed = self.memory.ListMemories(mpb.ListMemoriesRequest(), metadata=self.auth)
        shown["memories"] = listed.SerializeToString(deterministic=True)
        shown["templates"] = self.prompts.ListTemplates(
            ppb.ListTemplatesRequest(), metadata=self.auth
        ).SerializeToString(deterministic=True)
        shown["skills"] = self.prompts.ListSkills(
            ppb.ListSkillsRequest(), metadata=self.auth
        ).SerializeToString(deterministic=True)
        return shown


@dataclass
class Keys:
    """The keys a filled store was made with (the copy keeps them working)."""

    alice: str  # the default tenant
    acme_bob: str


def shown_by(address: str, keys: Keys) -> dict[str, dict[str, Any]]:
    with grpc.insecure_channel(address) as channel:
        return {
            "alice": Client(channel, keys.alice).shown(),
            "acme bob": Client(channel, keys.acme_bob).shown(),
        }
