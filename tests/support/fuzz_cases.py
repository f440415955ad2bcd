"""Every RPC's fuzz case: the valid request the fuzz tests mutate, one field at a time, so
that their requests get past the first checks and reach look-ups, stores and turns. An
RPC added to the protos needs a line here: the fuzz tests fail for an RPC without one.

A case is built from the resources stored for the fuzz user just before (a session with
a question and its answer, a memory), named where the request names a stored resource.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import Message

from tests.support.auth import Rpc, StoredIds, with_ids

Case = Callable[[Rpc, StoredIds, str], Message]


def naming_the_users_resources(rpc: Rpc, ids: StoredIds, user: str) -> Message:
    """The request as the user would send it, naming their session, answer or memory."""
    request, _ = with_ids(rpc, ids, user, "train")
    return request


def of_a_user_with_nothing(rpc: Rpc, ids: StoredIds, user: str) -> Message:
    """DeleteUser of a user with nothing stored: one that succeeds leaves the fuzz user's
    resources for the next example."""
    return naming_the_users_resources(rpc, ids, f"{user}-nothing")


CASES: dict[str, Case] = {
    "contextd.v1.ChatService/StreamChat": naming_the_users_resources,
    "contextd.v1.ContextService/AssemblePrompt": naming_the_users_resources,
    "contextd.v1.ContextService/BuildMessages": naming_the_users_resources,
    "contextd.v1.ContextService/Collect": naming_the_users_resources,
    "contextd.v1.ContextService/CountTokens": naming_the_users_resources,
    "contextd.v1.ContextService/ListTokenizers": naming_the_users_resources,
    "contextd.v1.MemoryService/AddMemory": naming_the_users_resources,
    "contextd.v1.MemoryService/SearchMemories": naming_the_users_resources,
    "contextd.v1.MemoryService/ListMemories": naming_the_users_resources,
    "contextd.v1.MemoryService/DeleteMemory": naming_the_users_resources,
    "contextd.v1.MemoryService/UpdateMemory": naming_the_users_resources,
    "contextd.v1.MemoryService/ListMemoryHistory": naming_the_users_resources,
    "contextd.v1.PromptService/UpsertTemplate": naming_the_users_resources,
    "contextd.v1.PromptService/ListTemplates": naming_the_users_resources,
    "contextd.v1.PromptService/DeleteTemplate": naming_the_users_resources,
    "contextd.v1.PromptService/UpsertSkill": naming_the_users_resources,
    "contextd.v1.PromptService/ListSkills": naming_the_users_resources,
    "contextd.v1.PromptService/DeleteSkill": naming_the_users_resources,
    "contextd.v1.SessionService/CreateSession": naming_the_users_resources,
    "contextd.v1.SessionService/GetSession": naming_the_users_resources,
    "contextd.v1.SessionService/ListSessions": naming_the_users_resources,
    "contextd.v1.SessionService/DeleteSession": naming_the_users_resources,
    "contextd.v1.SessionService/AppendMessages": naming_the_users_resources,
    "contextd.v1.SessionService/ListMessages": naming_the_users_resources,
    "contextd.v1.SessionService/AddCompressionSummary": naming_the_users_resources,
    "contextd.v1.SessionService/SetSessionSummary": naming_the_users_resources,
    "contextd.v1.SessionService/ExportEvents": naming_the_users_resources,
    "contextd.v1.SessionService/EndSession": naming_the_users_resources,
    "contextd.v1.UserService/DeleteUser": of_a_user_with_nothing,
}
