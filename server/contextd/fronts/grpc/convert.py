"""Proto messages <-> domain objects, as the services share them: messages and their
parts, tokenizers, editing, cache layouts, memory modes, build reports, ids (their form, and
the opaque strings callers see for row numbers); a service's own requests are read
beside its servicer.

A request is read here, once, into the command app/ runs: enum numbers become core's
enums, the tokenizer's name its tokenizer, content parts checked parts. Every bad field
is named in one INVALID_ARGUMENT (an unknown value stands in as the default meanwhile,
so that the rest of the request can still be checked); app/ and core/ see only
commands in their own terms.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from contextd.app.scope import not_found
from contextd.app.session_build_request import ContextLayer
from contextd.core.build_request import BuildReport, CacheLayout
from contextd.core.content import ContentPart, ImageLimits, parts_text
from contextd.core.editing import EditingOptions, EditingSettings, EditKind, check_editing
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import DropReason
from contextd.core.prompt import LayerReport
from contextd.core.tokens import EstimateTokenizer, Tokenizer, TokenizerRegistry
from contextd.fronts.grpc.content_parts import fill_parts, parts_from_pb
from contextd.v1 import context_pb2 as pb

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

_ROLE_TO_PB: dict[Role, pb.Role] = {
    Role.SYSTEM: pb.ROLE_SYSTEM,
    Role.USER: pb.ROLE_USER,
    Role.ASSISTANT: pb.ROLE_ASSISTANT,
    Role.TOOL: pb.ROLE_TOOL,
}
_ROLES: dict[int, Role] = {number: role for role, number in _ROLE_TO_PB.items()}
_USER = Role.USER  # read once: per message, enum member lookups show up in the benchmark
CACHE_LAYOUTS: dict[int, CacheLayout] = {
    pb.CACHE_LAYOUT_UNSPECIFIED: CacheLayout.OFF,
    pb.CACHE_LAYOUT_OFF: CacheLayout.OFF,
    pb.CACHE_LAYOUT_STABLE_PREFIX: CacheLayout.STABLE_PREFIX,
}
# None: the server's setting.
_MEMORY_MODES: dict[int, bool | None] = {
    pb.MEMORY_MODE_UNSPECIFIED: None,
    pb.MEMORY_MODE_ON: True,
    pb.MEMORY_MODE_OFF: False,
}
_EDIT_KINDS = {
    EditKind.CAPPED: pb.EDIT_KIND_CAPPED,
    EditKind.CLEARED: pb.EDIT_KIND_CLEARED,
    EditKind.COMPACTED: pb.EDIT_KIND_COMPACTED,
}
_DROP_REASONS = {
    DropReason.COMPRESSED: pb.DROP_REASON_COMPRESSED,
    DropReason.EMPTY: pb.DROP_REASON_EMPTY,
    DropReason.ORPHANED_TOOL_RESULT: pb.DROP_REASON_ORPHANED_TOOL_RESULT,
    DropReason.BUDGET: pb.DROP_REASON_BUDGET,
    DropReason.LEADING_ASSISTANT: pb.DROP_REASON_LEADING_ASSISTANT,
}


# --- requests ---------------------------------------------------------------------------


def editing_from_pb(
    message: pb.ContextEditing,
    present: bool,
    defaults: EditingSettings,
    field: str,
    violations: Violations,
) -> EditingSettings:
    """The editing a request asks for (``present``: whether it set the field), each field
    it leaves unset the server's ``defaults``; every bad field recorded."""
    if not present:
        return defaults

    def given(name: str) -> int | None:
        return int(getattr(message, name)) if message.HasField(name) else None

    options = EditingOptions(
        cap_tokens=given("tool_result_cap_tokens"),
        clear_trigger_tokens=given("clear_trigger_tokens"),
        clear_trigger_tool_uses=given("clear_trigger_tool_uses"),
        keep_tool_results=given("keep_tool_results"),
        clear_at_least_tokens=given("clear_at_least_tokens"),
        clear_tool_inputs=(
            message.clear_tool_inputs if message.HasField("clear_tool_inputs") else None
        ),
        exclude_tools=tuple(message.exclude_tools),
    )
    check_editing(options, field, violations)
    return options.resolve(defaults)


def tokenizer_from_pb(
    name: str, tokenizers: TokenizerRegistry, violations: Violations
) -> Tokenizer:
    """The named tokenizer (the default for ""); an unknown name is recorded and a
    stand-in returned."""
    try:
        return tokenizers.get(name)
    except InvalidArgument as error:
        violations.extend(error.violations)
        return EstimateTokenizer()


def cache_layout_from_pb(value: int, field: str, violations: Violations) -> CacheLayout:
    layout = CACHE_LAYOUTS.get(value)
    if layout is None:
        violations.add(field, f"unknown cache layout {value}")
        return CacheLayout.OFF
    return layout


def memory_from_pb(value: int, field: str, violations: Violations) -> bool | None:
    """Whether memory is on for the request; None: the server's setting."""
    if value not in _MEMORY_MODES:
        violations.add(field, f"unknown memory mode {value}")
    return _MEMORY_MODES.get(value)


def messages_from_pb(
    messages: Iterable[pb.Message], field: str, violations: Violations, limits: ImageLimits
) -> list[ChatMessage]:
    """The messages in the domain model; an unknown role number is recorded and read as
    a user turn."""
    out: list[ChatMessage] = []
    add = out.append
    roles = _ROLES
    for i, m in enumerate(messages):
        role = roles.get(m.role)
        if role is None:
            violations.add(f"{field}[{i}].role", f"unknown role {m.role}; use a ROLE_* value")
            role = _USER
        calls = m.tool_calls
        message = ChatMessage(
            role,
            m.content,
            tuple(ToolCall(c.id, c.name, c.arguments) for c in calls) if calls else (),
            m.tool_call_id,
            m.id,
        )
        if m.parts:
            message = _with_parts(message, m.parts, f"{field}[{i}]", violations, limits)
        add(message)
    return out


def _with_parts(
    message: ChatMessage,
    raw_parts: Sequence[pb.ContentPart],
    at: str,
    violations: Violations,
    limits: ImageLimits,
) -> ChatMessage:
    """The message with its parts, ``content`` their text view."""
    parts = parts_from_pb(raw_parts, f"{at}.parts", limits, violations)
    if message.role is not Role.USER:
        violations.add(f"{at}.parts", "only user messages carry parts")
    if message.content:
        violations.add(f"{at}.content", "must be empty when parts are given")
    return ChatMessage(message.role, parts_text(parts), id=message.id, parts=parts)


def user_message_from_pb(
    user_message: str,
    raw_parts: Sequence[pb.ContentPart],
    violations: Violations,
    limits: ImageLimits,
) -> tuple[str, tuple[ContentPart, ...]]:
    """The current user message's text (the parts' text view when given) and parts, from
    ``user_message`` and ``user_message_parts``."""
    if not raw_parts:
        return user_message, ()
    parts = parts_from_pb(raw_parts, "user_message_parts", limits, violations)
    if user_message:
        violations.add(
            "user_message_parts", "give either the user message's text or its parts, not both"
        )
    return parts_text(parts), parts


# --- responses --------------------------------------------------------------------------


def message_to_pb(m: ChatMessage, tokens: int) -> pb.Message:
    out = pb.Message()
    fill_message(out, m, tokens)
    return out


def fill_message(out: pb.Message, m: ChatMessage, tokens: int) -> None:
    out.role = _ROLE_TO_PB[m.role]
    out.content = m.content
    out.tokens = tokens
    if m.parts:
        fill_parts(out, m.parts)
    # Only what is set: each assignment costs a field lookup by name.
    if m.id:
        out.id = m.id
    if m.tool_call_id:
        out.tool_call_id = m.tool_call_id
    for c in m.tool_calls:
        out.tool_calls.add(id=c.id, name=c.name, arguments=c.arguments)


def layer_reports_to_pb(layers: list[LayerReport]) -> list[pb.LayerReport]:
    return [pb.LayerReport(name=x.name, included=x.included, tokens=x.tokens) for x in layers]


def fill_report(out: pb.BuildReport, r: BuildReport) -> None:
    # Field by field on the target (a keyword constructor looks every name up and
    # then copies the whole report into its parent), and only fields that are set:
    # each assignment costs a lookup by name.
    out.tokenizer = r.tokenizer
    out.token_budget = r.token_budget
    out.system_tokens = r.system_tokens
    if r.summary_tokens:
        out.summary_tokens = r.summary_tokens
    out.history_tokens = r.history_tokens
    out.user_message_tokens = r.user_message_tokens
    out.total_tokens = r.total_tokens
    if r.required_over_budget:
        out.required_over_budget = True
    if r.summary_included:
        out.summary_included = True
    out.history_kept = r.history_kept
    for x in r.dropped:
        out.dropped.add(start_index=x.start_index, count=x.count, reason=_DROP_REASONS[x.reason])
    for c in r.removed_tool_calls:
        out.removed_tool_calls.add(index=c.index, tool_call_id=c.tool_call_id)
    for mv in r.moved_tool_results:
        out.moved_tool_results.add(
            tool_call_id=mv.tool_call_id, from_index=mv.from_index, call_index=mv.call_index
        )
    if r.layers:
        out.layers.extend(layer_reports_to_pb(r.layers))
    if r.cacheable_prefix_tokens:
        out.cacheable_prefix_tokens = r.cacheable_prefix_tokens
    if r.image_tokens:
        out.image_tokens = r.image_tokens
    for e in r.edits:
        out.edits.add(
            index=e.index,
            kind=_EDIT_KINDS[e.kind],
            tokens_before=e.tokens_before,
            tokens_after=e.tokens_after,
            tool_call_id=e.tool_call_id,
            tool_name=e.tool_name,
            count=e.count,
        )
    if r.cache_prefix_kept_tokens:
        out.cache_prefix_kept_tokens = r.cache_prefix_kept_tokens


def add_context_layers(
    out: RepeatedCompositeFieldContainer[pb.ContextLayerReport], layers: Iterable[ContextLayer]
) -> None:
    """``layers`` added to ``out`` in place (no message made and then copied in)."""
    for x in layers:
        layer = out.add()
        layer.name = x.name
        if x.included:
            layer.included = True
        if x.tokens:
            layer.tokens = x.tokens
        if x.items_kept:
            layer.items_kept = x.items_kept
        if x.items_dropped:
            layer.items_dropped = x.items_dropped
        if x.note:
            layer.note = x.note


# Ids as callers see them: the form every id of a request must have, and the opaque
# strings that stand for the store's message and memory row numbers. The store numbers
# messages and memories 1, 2, 3...; a caller never sees those numbers. Each is shown as
# one AES block (a keyed permutation of 128-bit values) of its kind and number, in URL-
# safe base64: 22 characters that say nothing of the number, of how many rows there are,
# or of which ids exist, and that nobody without the key can make. Seven zero bytes in
# the block are the check: a string that was not made with the key decodes to a valid id
# with a chance of 2^-56. The kind is in the block too, so a memory's id never names a
# message. The key is the deployment's (store/server_secrets.py), shared by every
# replica on one database.

# Every id a request names (session, message, memory): what the server gives out fits
# it with room to spare (a session's is 32 hex digits, a message's or memory's 22
# characters); anything else is refused as INVALID_ARGUMENT before it is looked up.
_ID_FORM = re.compile(r"[A-Za-z0-9_-]{1,64}")
ID_FORM_RULE = "at most 64 letters, digits, '_' or '-'"

# Ids encoded lately, per kind: a session's build shows the same messages turn after
# turn, and a look-up costs a sixth of an encoding. Emptied when full.
_REMEMBERED = 16384
_CHECK = bytes(7)
_ENCODED_CHARS = 22  # 16 bytes of base64 without its padding


def is_id_form(value: str) -> bool:
    """Whether ``value`` has the form of an id (see ``ID_FORM_RULE``)."""
    return _ID_FORM.fullmatch(value) is not None


class IdKind(IntEnum):
    MESSAGE = 1
    MEMORY = 2
    COMPRESSION_SUMMARY = 3
    MEMORY_CHANGE = 4  # a row of a memory's history


class OpaqueIds:
    """Row numbers <-> the strings callers see, under one key."""

    __slots__ = ("_decrypt", "_encoded", "_encrypt")

    def __init__(self, key: bytes) -> None:
        """``key``: the deployment's AES key (store/server_secrets.py)."""
        cipher = Cipher(algorithms.AES(key), modes.ECB())
        # One block at a time through long-lived contexts: ECB keeps no state between
        # blocks, and a context costs a twentieth of making a new one per id. Each
        # update() runs whole under the GIL.
        self._encrypt = cipher.encryptor()
        self._decrypt = cipher.decryptor()
        self._encoded: dict[IdKind, dict[int, str]] = {kind: {} for kind in IdKind}

    def encode(self, kind: IdKind, number: int) -> str:
        """The caller's string for row ``number`` (0 < number < 2**63) of ``kind``."""
        encoded = self._encoded[kind]
        text = encoded.get(number)
        if text is None:
            if len(encoded) >= _REMEMBERED:
                encoded.clear()
            block = bytes((kind,)) + _CHECK + number.to_bytes(8, "big")
            data = self._encrypt.update(block)
            text = encoded[number] = base64.urlsafe_b64encode(data).decode("ascii")[:22]
        return text

    def decode(self, kind: IdKind, text: str) -> int | None:
        """The row number ``text`` stands for; None when it is not a string ``encode``
        made for ``kind`` with this key (another kind, another deployment, a forgery,
        a number as ids were once given out)."""
        if len(text) != _ENCODED_CHARS:
            return None
        try:
            data = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            return None
        # Base64 has two spellings of the last 4 bits: only the one encode() makes counts.
        if base64.urlsafe_b64encode(data).decode("ascii")[:22] != text:
            return None
        block = self._decrypt.update(data)
        if block[0] != kind or block[1:8] != _CHECK:
            return None
        number = int.from_bytes(block[8:], "big")
        return number if 0 < number < 2**63 else None


# Ids at the API's edge: every id a request names is checked for its form before anything
# is looked up, and message and memory ids are translated between the opaque strings
# callers see (OpaqueIds, above) and the row numbers app/ and the store use.
#
# A string of the wrong form (too long, a character no id has) is INVALID_ARGUMENT naming
# its field, quoting nothing. A string of the right form that this deployment did not give
# out for that kind of row (a forgery, another deployment's id, a memory's id where a
# message's goes, a number as ids were once given out) is NOT_FOUND, as an id of a deleted
# row or of another user is: no answer tells which.
_NOT_AN_ID = f"not an id: {ID_FORM_RULE}"


def check_id(value: str, field: str, violations: Violations) -> None:
    """Record ``field`` when it names an id (it is not empty) of the wrong form."""
    if value and not is_id_form(value):
        violations.add(field, _NOT_AN_ID)


def check_ids(*named: tuple[str, str]) -> None:
    """INVALID_ARGUMENT naming each (field, value) whose value has the wrong form."""
    v = Violations()
    for field, value in named:
        check_id(value, field, v)
    v.raise_if_any()


class PublicIds:
    """Message and memory ids, both ways."""

    __slots__ = ("_codec",)

    def __init__(self, codec: OpaqueIds) -> None:
        self._codec = codec

    def message(self, row: str | int) -> str:
        """A stored message's id (app/ holds it as its row number, or that number's
        digits); "" for none."""
        return self._codec.encode(IdKind.MESSAGE, int(row)) if row else ""

    def memory(self, row: int) -> str:
        return self._codec.encode(IdKind.MEMORY, row) if row else ""

    def memory_change(self, row: int) -> str:
        return self._codec.encode(IdKind.MEMORY_CHANGE, row)

    def compression_summary(self, row: int) -> str:
        return self._codec.encode(IdKind.COMPRESSION_SUMMARY, row)

    def message_row(self, value: str, field: str) -> str:
        """The row number (as digits, app/'s form) of the message id in ``field``; ""
        stays "" (app/ says whether it is required)."""
        return self._row(IdKind.MESSAGE, value, field, "message")

    def message_rows(self, values: Sequence[str], field: str) -> list[str]:
        return [self.message_row(v, f"{field}[{k}]") for k, v in enumerate(values)]

    def memory_row(self, value: str, field: str) -> str:
        return self._row(IdKind.MEMORY, value, field, "memory")

    def _row(self, kind: IdKind, value: str, field: str, what: str) -> str:
        if not value:
            return ""
        if not is_id_form(value):
            raise InvalidArgument.one(field, _NOT_AN_ID)
        row = self._codec.decode(kind, value)
        if row is None:
            raise not_found(what, field)
        return str(row)
