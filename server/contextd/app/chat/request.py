"""What a chat turn is asked to do: the request and its model options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contextd.app.chat.inline_tools import MEMORY_TOOL, RECALL_TOOL
from contextd.app.scope import Caller
from contextd.core.build_request import CacheLayout
from contextd.core.content import ContentPart
from contextd.core.editing import EditingSettings
from contextd.core.editing.compaction import NO_OPTIONS, CompactionOptions
from contextd.core.editing.settings import OFF as EDITING_OFF
from contextd.core.errors import Violations, shown
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank
from contextd.core.tokens import Tokenizer
from contextd.providers.base import AUTO, TEXT, ResponseFormat, ToolChoice, ToolSpec
from contextd.store.event_log.events import check_mode

# The longest answer_note: room for a request's parameters (instructions, tool schemas).
MAX_ANSWER_NOTE = 262_144


@dataclass(frozen=True, slots=True)
class ModelOptions:
    model: str = ""
    temperature: float | None = None
    max_output_tokens: int | None = None
    stop: Sequence[str] = ()
    response_format: ResponseFormat = TEXT


@dataclass(frozen=True, slots=True)
class ChatTurnRequest:
    caller: Caller
    session_id: str  # "" starts a new session
    user_message: str
    tokenizer: Tokenizer
    scenario: str = ""
    host: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)
    memory: bool | None = None
    cache_layout: CacheLayout = CacheLayout.OFF
    # Prebuilt mode: the host's own list (system messages first, then history).
    messages: Sequence[ChatMessage] = ()
    tools: Sequence[ToolSpec] = ()
    tool_results: Sequence[tuple[str, str]] = ()  # (tool_call_id, content)
    token_budget: int = 0
    refuse_over_limit: bool = False
    model: ModelOptions = ModelOptions()
    title: str = ""
    # Offer the tools with the ReAct tag protocol (core.react) instead of the
    # provider's native tool calling, for models without it.
    react: bool = False
    # When the call ends, in time.monotonic() seconds; None when it has no deadline.
    deadline: float | None = None
    # How the client runs the session (session_start's meta.mode); "" for the default.
    mode: str = ""
    # The user message's text and images; ``user_message`` is then their text view.
    user_parts: tuple[ContentPart, ...] = ()
    # Tool results capped and cleared in every step's context.
    editing: EditingSettings = EDITING_OFF
    # The session's compaction after the turn (None fields: the server's settings).
    compaction: CompactionOptions = NO_OPTIONS
    # The context is ``messages`` and the user message only, even with no messages: no
    # stored history, memories or summaries, and no memory_search tool.
    prebuilt: bool = False
    tool_choice: ToolChoice = AUTO
    parallel_tool_calls: bool | None = None
    # Nothing of the turn is stored (no session, message, partial answer, event log
    # line, memory or summary): a prebuilt turn run in memory only.
    ephemeral: bool = False
    # Kept with the turn's stored answer (answer_records), for the host to read back.
    answer_note: str = ""

    @property
    def host_list_only(self) -> bool:
        """Prebuilt mode: the context is the host's own list."""
        return self.prebuilt or self.ephemeral or bool(self.messages)

    @property
    def continues_host_list(self) -> bool:
        """A prebuilt turn that goes on after the tool results ending the host's list."""
        return (
            self.host_list_only
            and is_blank(self.user_message)
            and not self.user_parts
            and bool(self.messages)
            and self.messages[-1].role is Role.TOOL
        )

    @property
    def trailing_results(self) -> Sequence[ChatMessage]:
        """The tool messages that end the host's list."""
        first = len(self.messages)
        while first and self.messages[first - 1].role is Role.TOOL:
            first -= 1
        return self.messages[first:]

    @property
    def offers_recall(self) -> bool:
        """Whether the turn offers the ``recall_tool_result`` tool: when it edits tool
        messages, with native tool calling (ReAct observations are never edited)."""
        return self.editing.active and not self.react

    def prompt_budget(self, max_prompt_tokens: int) -> int:
        """The turn's prompt budget: its own, at most the server's limit."""
        return min(self.token_budget or max_prompt_tokens, max_prompt_tokens)

    def log_meta(self, provider: str, default_model: str) -> dict[str, object]:
        """session_start's meta: how the session runs (answered by ``provider``, whose
        model is ``default_model`` unless the request names one), its model settings and
        which tools its turns offer (the host's, then the server's), so a log says what
        was on."""
        server_tools = [MEMORY_TOOL.name]
        if self.offers_recall:
            server_tools.append(RECALL_TOOL.name)
        meta: dict[str, object] = {
            "mode": self.mode or ("prebuilt" if self.host_list_only else "session"),
            "provider": provider,
            "model": self.model.model or default_model,
            "tokenizer": self.tokenizer.name,
        }
        if self.model.temperature is not None:
            # A float32 on the wire: 0.7 arrives as 0.699999988..., logged as sent.
            meta["temperature"] = round(self.model.temperature, 6)
        meta["tool_protocol"] = "react" if self.react else "native"
        meta["tools"] = [*(t.name for t in self.tools), *server_tools]
        return meta


def validate(req: ChatTurnRequest) -> None:
    """Refuse a request no turn can run, naming every offending field."""
    v = Violations()
    if req.tool_results and not req.session_id:
        v.add("session.session_id", "tool results continue a stored session: give its id")
    if req.tool_results and req.react and (not is_blank(req.user_message) or req.user_parts):
        v.add("user_message", "not beside tool_results with tool_protocol REACT")
    if not req.tool_results and is_blank(req.user_message) and not req.continues_host_list:
        v.add("user_message", "required unless the prebuilt messages end with tool results")
    if req.token_budget < 0:
        v.add("token_budget", "must not be negative")
    check_mode(req.mode, "mode", v)
    for k, (call_id, _) in enumerate(req.tool_results):
        if not call_id:
            v.add(f"tool_results[{k}].tool_call_id", "required")
    names = set()
    reserved = {MEMORY_TOOL.name}
    if req.offers_recall:
        reserved.add(RECALL_TOOL.name)
    for k, tool in enumerate(req.tools):
        if tool.name in reserved or tool.name in names:
            v.add(f"tools[{k}].name", f"duplicate or reserved tool name {shown(tool.name)}")
        names.add(tool.name)
    if req.host_list_only and req.tool_results:
        v.add("messages", "prebuilt messages cannot continue a stored turn")
    if req.ephemeral:
        if req.session_id:
            v.add("session.session_id", "an ephemeral turn runs in no stored session")
        if req.title:
            v.add("title", "an ephemeral turn has no session to name")
        if req.react:
            v.add("tool_protocol", "REACT names its calls after stored steps: not ephemeral")
        if req.answer_note:
            v.add("answer_note", "an ephemeral turn stores no answer to keep it with")
    if len(req.answer_note) > MAX_ANSWER_NOTE:
        v.add("answer_note", f"at most {MAX_ANSWER_NOTE:,} characters")
    _check_tool_choice(req, v)
    if req.react and req.model.response_format.is_json:
        v.add("model.response_format", "not with tool_protocol REACT (its answers are tagged)")
    v.raise_if_any()


def _check_tool_choice(req: ChatTurnRequest, v: Violations) -> None:
    choice = req.tool_choice
    if choice.forces_call and req.react:
        v.add("tool_choice.mode", "a call cannot be forced with tool_protocol REACT")
    if choice.mode == "required" and not req.tools:
        v.add("tool_choice.mode", "REQUIRED needs at least one of the host's tools")
    if choice.mode == "function" and choice.name not in {t.name for t in req.tools}:
        v.add("tool_choice.function_name", f"not a tool of the request: {shown(choice.name)}")
    elif choice.mode != "function" and choice.name:
        v.add("tool_choice.function_name", "only with mode FUNCTION")
