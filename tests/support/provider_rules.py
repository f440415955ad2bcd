"""Request-shape rules of the two provider APIs contextd renders for, as checkers.

``openai_violations`` and ``anthropic_violations`` take a payload as
``build_messages`` renders it and return human-readable violations (empty list
when the payload is acceptable). They check only the parts contextd produces
(the message list and, for Anthropic, the system text), not ``model``,
``max_tokens`` and so on.

Both (sources: each API reference's request format, a JSON body; RFC 8259 for
what JSON text is, and its section 8.1 for UTF-8 on the wire):

  J0  The payload serialises as strict JSON in UTF-8: no NaN or Infinity
      numbers (they are not JSON) and no lone surrogates in strings (they
      cannot be encoded as UTF-8).

OpenAI Chat Completions (sources: API reference, "Create chat completion",
request body ``messages`` and its per-role message objects; Function calling
guide, sections on tool calls and on returning tool results; the API's 400
messages about tool messages, which the guide's rules correspond to):

  O1  ``messages`` is a non-empty array of objects whose ``role`` is one of
      system, developer, user, assistant, tool.
  O2  system, developer, user and tool messages carry a ``content`` that is a
      string or an array of content parts; it is required.
  O3  An assistant message's ``content`` may be null or absent only when it has
      ``tool_calls``; otherwise it is required (string or array of parts).
  O4  ``tool_calls``, when present, is a non-empty array; each call has a
      non-empty string ``id`` (unique within the message), ``type`` equal to
      "function", and a ``function`` object whose ``name`` matches
      ``^[a-zA-Z0-9_-]{1,64}$`` (the function-name rule of the tools
      definition) and whose ``arguments`` is a string holding JSON (the call's
      parameters: a JSON object). Strict JSON: NaN/Infinity are not JSON.
  O5  A tool message has a string ``tool_call_id`` and must answer a tool call
      of the assistant message that precedes the run of tool messages it is in
      ("must be a response to a preceding message with tool_calls").
  O6  An assistant message with ``tool_calls`` must be followed, before any
      non-tool message, by tool messages answering each ``tool_call_id``; each
      call is answered exactly once.
  O7  (contextd's contract, not an API rule) the last message is the user's;
      ``require_final_user=False`` for a continuation after tool results,
      where tool messages end the list as in any tool loop.

Anthropic Messages (sources: API reference, "Messages" / create a message,
body parameters ``system`` and ``messages`` and the content block types;
"Handle tool calls" page of the tool-use docs, its formatting requirements for
tool results; the API's 400 messages for whitespace text, tool id pattern and
unmatched tool_use / tool_result ids):

  A1  ``system``, when present, is a top-level parameter: here a non-empty
      string (the API also accepts an array of text blocks; contextd sends a
      string). No message has role "system".
  A2  ``messages`` is a non-empty array; each item has ``role`` "user" or
      "assistant" and ``content`` that is a string or a non-empty array of
      content blocks.
  A3  The first message is the user's and roles alternate user/assistant
      (the API merges consecutive same-role turns; contextd is expected to send
      strictly alternating turns), and (contextd's contract) the last message
      is the user's.
  A4  String content and ``text`` blocks must be non-empty and hold
      non-whitespace text.
  A5  Content blocks used here: ``text`` (``text`` string), ``tool_use``
      (assistant only: ``id`` matching ``^[a-zA-Z0-9_-]+$`` and unique in the
      request, ``name`` matching ``^[a-zA-Z0-9_-]{1,64}$``, ``input`` an
      object), ``tool_result`` (user only: ``tool_use_id`` string, optional
      ``content`` string or array of blocks, optional boolean ``is_error``).
  A6  Every ``tool_use`` of an assistant turn is answered by a ``tool_result``
      in the immediately following user turn; that turn's ``tool_result``
      blocks answer only the previous assistant turn's ``tool_use`` ids, each
      exactly once.
  A7  In a user turn holding tool results, the ``tool_result`` blocks come
      first; any text comes after all of them.

Not enforced (no documented rule found): emptiness of OpenAI user or tool
content, or of Anthropic ``tool_result`` content.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ANTHROPIC_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")
_OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_json_object(text: str) -> str | None:
    """None when ``text`` is a strict-JSON object, else why not."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        return f"is not JSON ({exc})"
    if not isinstance(value, dict):
        return f"is JSON {type(value).__name__}, not an object"
    return None


def _json_body_violations(payload: Any) -> list[str]:
    """J0: the payload must go on the wire as strict JSON text in UTF-8."""
    try:
        json.dumps(payload, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        return [f"payload: cannot be sent as a strict UTF-8 JSON body ({exc}) (J0)"]
    return []


def _is_content(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(p, dict) and "type" in p for p in value)
    )


# --- OpenAI Chat Completions ------------------------------------------------------------------


def _openai_tool_calls(at: str, calls: Any, out: list[str]) -> list[str]:
    """Check O4; return the string ids of the calls."""
    if not isinstance(calls, list) or not calls:
        out.append(f"{at}.tool_calls: must be a non-empty array when present (O4)")
        return []
    ids: list[str] = []
    for j, call in enumerate(calls):
        cat = f"{at}.tool_calls[{j}]"
        if not isinstance(call, dict):
            out.append(f"{cat}: must be an object (O4)")
            continue
        cid = call.get("id")
        if not isinstance(cid, str) or not cid:
            out.append(f"{cat}.id: must be a non-empty string (O4)")
        elif cid in ids:
            out.append(f"{cat}.id: duplicate id {cid!r} in one message (O4)")
        else:
            ids.append(cid)
        if call.get("type") != "function":
            out.append(f"{cat}.type: must be 'function', got {call.get('type')!r} (O4)")
        fn = call.get("function")
        if not isinstance(fn, dict):
            out.append(f"{cat}.function: must be an object (O4)")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.fullmatch(name):
            out.append(f"{cat}.function.name: {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$ (O4)")
        args = fn.get("arguments")
        if not isinstance(args, str):
            out.append(f"{cat}.function.arguments: must be a string of JSON (O4)")
        else:
            why = _strict_json_object(args)
            if why:
                out.append(f"{cat}.function.arguments: {args!r} {why} (O4)")
    return ids


def openai_violations(payload: Any, *, require_final_user: bool = True) -> list[str]:
    if not isinstance(payload, dict):
        return ["payload: must be an object"]
    out = _json_body_violations(payload)
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, "messages: must be a non-empty array (O1)"]

    # Calls of the last assistant message with tool_calls still waiting for results;
    # None when the previous message was neither that assistant nor one of its results.
    open_calls: dict[str, int] | None = None
    pending_at = ""

    def close_run(at: str) -> None:
        nonlocal open_calls
        if open_calls:
            missing = [cid for cid, n in open_calls.items() if n == 0]
            if missing:
                out.append(
                    f"{pending_at}: tool_calls {missing} have no tool message before {at} (O6)"
                )
        open_calls = None

    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            out.append(f"{at}: must be an object (O1)")
            close_run(at)
            continue
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            out.append(f"{at}.role: {role!r} is not a Chat Completions role (O1)")
            close_run(at)
            continue
        if role == "tool":
            if not _is_content(m.get("content")):
                out.append(f"{at}.content: a tool message needs string content (O2)")
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                out.append(f"{at}.tool_call_id: must be a non-empty string (O5)")
            elif open_calls is None or tcid not in open_calls:
                out.append(
                    f"{at}: tool message for {tcid!r} does not answer a call of the "
                    "assistant message directly before its run of tool messages (O5)"
                )
            else:
                open_calls[tcid] += 1
                if open_calls[tcid] > 1:
                    out.append(f"{at}: second tool message for {tcid!r} (O6)")
            continue
        close_run(at)
        if role == "assistant":
            has_calls = "tool_calls" in m and m["tool_calls"] is not None
            content = m.get("content")
            if content is None:
                if not has_calls:
                    out.append(f"{at}.content: null/absent is allowed only with tool_calls (O3)")
            elif not _is_content(content):
                out.append(f"{at}.content: must be a string, parts array or null (O3)")
            if has_calls:
                ids = _openai_tool_calls(at, m["tool_calls"], out)
                open_calls = dict.fromkeys(ids, 0)
                pending_at = at
        else:
            if not _is_content(m.get("content")):
                out.append(f"{at}.content: required for a {role} message (O2)")
            if "tool_calls" in m or "tool_call_id" in m:
                out.append(f"{at}: only assistant messages carry tool_calls (O4/O5)")
    close_run("the end of messages")
    last = messages[-1]
    if require_final_user and not (isinstance(last, dict) and last.get("role") == "user"):
        out.append("messages[-1]: the last message must be the user's (O7)")
    return out


# --- Anthropic Messages -----------------------------------------------------------------------


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else []


def _anthropic_block(at: str, role: str, block: Any, seen_ids: set[str], out: list[str]) -> None:
    if not isinstance(block, dict):
        out.append(f"{at}: a content block must be an object (A5)")
        return
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            out.append(f"{at}.text: must be a string (A5)")
        elif not text.strip():
            out.append(f"{at}.text: text blocks must hold non-whitespace text, got {text!r} (A4)")
    elif kind == "tool_use":
        if role != "assistant":
            out.append(f"{at}: tool_use blocks belong to assistant turns (A5)")
        tid = block.get("id")
        if not isinstance(tid, str) or not _ANTHROPIC_TOOL_ID.fullmatch(tid):
            out.append(f"{at}.id: {tid!r} does not match ^[a-zA-Z0-9_-]+$ (A5)")
        elif tid in seen_ids:
            out.append(f"{at}.id: tool_use id {tid!r} used twice in the request (A5)")
        else:
            seen_ids.add(tid)
        name = block.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.fullmatch(name):
            out.append(f"{at}.name: {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$ (A5)")
        if not isinstance(block.get("input"), dict):
            out.append(f"{at}.input: must be an object (A5)")
    elif kind == "tool_result":
        if role != "user":
            out.append(f"{at}: tool_result blocks belong to user turns (A5)")
        if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
            out.append(f"{at}.tool_use_id: must be a non-empty string (A5)")
        if "content" in block and not _is_content(block["content"]):
            out.append(f"{at}.content: must be a string or an array of blocks (A5)")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            out.append(f"{at}.is_error: must be a boolean (A5)")
    else:
        out.append(f"{at}.type: unexpected block type {kind!r} (A5)")


def anthropic_violations(payload: Any, *, require_final_user: bool = True) -> list[str]:
    if not isinstance(payload, dict):
        return ["payload: must be an object"]
    out = _json_body_violations(payload)
    if "system" in payload:
        system = payload["system"]
        if not isinstance(system, str) or not system.strip():
            out.append("system: must be a non-empty string when present (A1)")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, "messages: must be a non-empty array (A2)"]

    seen_tool_use_ids: set[str] = set()
    prev_role: str | None = None
    prev_tool_uses: list[str] = []
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            out.append(f"{at}: must be an object (A2)")
            prev_role, prev_tool_uses = None, []
            continue
        role = m.get("role")
        if role == "system":
            out.append(f"{at}.role: system text goes in the top-level system parameter (A1)")
        elif role not in ("user", "assistant"):
            out.append(f"{at}.role: {role!r} must be 'user' or 'assistant' (A2)")
        if i == 0 and role != "user":
            out.append(f"{at}: the first message must be the user's, got {role!r} (A3)")
        if prev_role is not None and role == prev_role:
            out.append(f"{at}: two {role} turns in a row; roles must alternate (A3)")

        content = m.get("content")
        if isinstance(content, str):
            if not content.strip():
                out.append(f"{at}.content: must hold non-whitespace text (A4)")
        elif not isinstance(content, list):
            out.append(f"{at}.content: must be a string or an array of blocks (A2)")
        elif not content:
            out.append(f"{at}.content: the block array must not be empty (A2)")
        for j, block in enumerate(_blocks(content)):
            _anthropic_block(f"{at}.content[{j}]", str(role), block, seen_tool_use_ids, out)

        blocks = [b for b in _blocks(content) if isinstance(b, dict)]
        types = [b.get("type") for b in blocks]
        # A7: tool_result blocks lead the turn.
        if "tool_result" in types:
            first_other = next((k for k, t in enumerate(types) if t != "tool_result"), len(types))
            if any(t == "tool_result" for t in types[first_other:]):
                out.append(f"{at}: tool_result blocks must come before any other content (A7)")
        # A6: results answer exactly the previous assistant turn's tool_use ids.
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if prev_tool_uses or results:
            expected = prev_tool_uses if prev_role == "assistant" and role == "user" else []
            for rid in results:
                if rid not in expected:
                    out.append(
                        f"{at}: tool_result for {rid!r} answers no tool_use of the "
                        "immediately preceding assistant turn (A6)"
                    )
            for rid in {r for r in results if results.count(r) > 1}:
                out.append(f"{at}: tool_use {rid!r} answered more than once (A6)")
            missing = [tid for tid in prev_tool_uses if tid not in results]
            if missing:
                out.append(
                    f"messages[{i - 1}]: tool_use ids {missing} have no tool_result in the "
                    "next (user) turn (A6)"
                )
        prev_tool_uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        prev_role = role if isinstance(role, str) else None
    if prev_tool_uses:
        out.append(
            f"messages[{len(messages) - 1}]: tool_use ids {prev_tool_uses} are never answered (A6)"
        )
    last = messages[-1]
    if require_final_user and not (isinstance(last, dict) and last.get("role") == "user"):
        out.append("messages[-1]: the last message must be the user's (A3)")
    return out
