"""What a model API's request and answer mean to a native turn, whatever the protocol:
the turn's inputs (history, user message, tool results), the session a request names,
the ``contextd`` extension field of an answer (the session, the stored ids, the context
report) and the failure of a turn that started.

Inline mode (no session named) runs the host's own messages as an ephemeral prebuilt
turn, of which nothing is stored; session mode runs the next turn of a stored session,
named by the ``X-Contextd-Session`` header or the ``contextd_session`` metadata key
("new" starts one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from contextd.fronts.chat_http.failure import HttpFailure, invalid, retry_advice
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

SESSION_HEADER = "X-Contextd-Session"
SESSION_KEY = "contextd_session"
TITLE_KEY = "contextd_title"
NEW_SESSION = "new"
SESSION_ID_HEADER = "X-Contextd-Session-Id"
EXTENSION = "contextd"

_STATUS = {
    cpb.TURN_STATUS_OK: "ok",
    cpb.TURN_STATUS_REQUIRES_ACTION: "requires_action",
    cpb.TURN_STATUS_MAX_STEPS: "max_steps",
    cpb.TURN_STATUS_CANCELLED: "cancelled",
    cpb.TURN_STATUS_ERROR: "error",
}


@dataclass
class Turn:
    """What the native StreamChatRequest gets from the messages."""

    history: list[pb.Message] = field(default_factory=list)
    user_message: str = ""
    user_parts: list[pb.ContentPart] = field(default_factory=list)
    tool_results: list[cpb.ToolResult] = field(default_factory=list)


def named_session(headers: Mapping[str, str], metadata: Mapping[str, str]) -> str | None:
    """The session a request names ("new" for a new one), or None for an inline turn."""
    header = headers.get(SESSION_HEADER)
    key = metadata.get(SESSION_KEY)
    if header is not None and key is not None and header.strip() != key.strip():
        raise invalid(
            f"metadata.{SESSION_KEY}", f"names another session than the {SESSION_HEADER} header"
        )
    named = (header if header is not None else key or "").strip()
    return named or None


def trailing_results(count: int, is_result: Callable[[int], bool]) -> range:
    """The positions of the tool results that end a list of ``count`` items (the last
    one is one): what a session-mode turn that goes on after its tool calls sends."""
    first = count - 1
    while first > 0 and is_result(first - 1):
        first -= 1
    return range(first, count)


def turn_request(
    turn: Turn,
    user: str,
    session: str | None,
    metadata: Mapping[str, str],
    headers: Mapping[str, str],
    params: ParamMap,
) -> cpb.StreamChatRequest:
    """The native request of ``turn`` for ``user`` in ``session`` (named_session's)."""
    named_by = SESSION_HEADER if headers.get(SESSION_HEADER) else f"metadata.{SESSION_KEY}"
    params.add("session.session_id", named_by)
    return cpb.StreamChatRequest(
        session=pb.SessionContext(
            user_id=user, session_id="" if session in (None, NEW_SESSION) else session
        ),
        user_message=turn.user_message,
        user_message_parts=turn.user_parts,
        messages=turn.history,
        tool_results=turn.tool_results,
        title=metadata.get(TITLE_KEY, "") if session == NEW_SESSION else "",
        # Inline: the host's messages only, even when there is just the user message,
        # and nothing of the turn stored.
        prebuilt=session is None,
        ephemeral=session is None,
    )


def started_extension(session_mode: bool, started: cpb.TurnStarted) -> dict[str, Any]:
    """The ``contextd`` field of an answer's start: the session, the turn, the report."""
    return {
        "mode": "session" if session_mode else "inline",
        "session_id": started.session_id,
        "turn_index": started.turn_index,
        "user_message_id": started.user_message_id,
        "prompt_tokens_estimate": started.prompt_tokens_estimate,
        "prompt_tokens_warning": started.prompt_tokens_warning,
        "provider": started.provider,
        "report": report_json(started.context),
    }


def ended_extension(done: cpb.TurnCompleted) -> dict[str, Any]:
    """The ``contextd`` field's part known once the turn ended."""
    return {
        "assistant_message_id": done.assistant_message_id,
        "status": _STATUS.get(done.status, "unknown"),
        "estimated_usage": done.turn_usage.estimated,
    }


def report_json(report: Message) -> dict[str, Any]:
    """The report with every field, zeros and empty lists included (the JSON mapping
    would leave them out)."""
    found: dict[str, Any] = json_format.MessageToDict(
        report, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


def turn_failure(
    done: cpb.TurnCompleted, session_mode: bool, headers: Mapping[str, str]
) -> HttpFailure | None:
    """The error a turn that failed after it started is answered with; None when it
    produced an answer. A session-mode turn stored its user message: a retry would store
    it twice, so the SDKs are told not to retry."""
    if done.status == cpb.TURN_STATUS_ERROR:
        status, code = 502, "provider_error"
        message = done.error_message or "the model provider failed"
    elif done.status == cpb.TURN_STATUS_CANCELLED:
        status, code = 503, "turn_cancelled"
        message = "the turn was cancelled before it ended"
    else:
        return None
    advice = retry_advice(headers, allowed=not session_mode)
    # The native call itself ended OK: the turn's status says how it failed.
    return HttpFailure(status, message, None, code, advice, grpc.StatusCode.OK)


def report_summary(report: pb.BuildReport) -> dict[str, Any]:
    """The report's totals, short enough for a header whatever the history: the
    whole report is in the answer's ``contextd`` field."""
    return {
        "tokenizer": report.tokenizer,
        "token_budget": report.token_budget,
        "total_tokens": report.total_tokens,
        "history_kept": report.history_kept,
        "history_dropped": sum(d.count for d in report.dropped),
        "edits": len(report.edits),
        "required_over_budget": report.required_over_budget,
    }
