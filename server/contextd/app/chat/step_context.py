"""The context each model step of a turn is sent, fitted to the turn's prompt budget."""

from __future__ import annotations

from collections.abc import Sequence

from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.turn import Turn
from contextd.app.session_build_request import ContextLayer, SessionBuildRequest
from contextd.app.session_context import SessionContextBuilder
from contextd.core.build import build_messages
from contextd.core.build_request import BuildReport, BuildRequest, BuildResult
from contextd.core.content import ContentPart
from contextd.core.errors import FailedPrecondition
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import DropReason, is_blank


class StepContexts:
    """Builds a turn's step contexts. Session mode builds from the stored session;
    prebuilt mode always from the host's list and message. ``reserved_tokens`` are
    left free in every context for what the tool protocol adds to the prompt;
    ``subject`` names what did not fit when a turn is refused for its size;
    ``blank_user_turns``: whether the model takes a user message without text;
    ``steps``: the call's messages after its input (its recorder's ``kept``), which a
    prebuilt context goes on from (a session-mode context reads them stored)."""

    def __init__(
        self,
        builder: SessionContextBuilder,
        max_prompt_tokens: int,
        req: ChatTurnRequest,
        turn: Turn,
        reserved_tokens: int = 0,
        subject: str = "the context",
        blank_user_turns: bool = True,
        steps: Sequence[ChatMessage] = (),
    ) -> None:
        self._builder = builder
        self._steps = steps
        self._max_prompt_tokens = max_prompt_tokens
        self._req = req
        self._turn = turn
        self._reserved_tokens = reserved_tokens
        self._subject = subject
        self._blank_user_turns = blank_user_turns
        # What each context layer gave the latest session-mode build (none for prebuilt).
        self.layers: list[ContextLayer] = []

    async def for_user_message(
        self,
        user_message: str,
        parts: tuple[ContentPart, ...] = (),
        pending: Sequence[ChatMessage] = (),
    ) -> BuildResult:
        """A step that answers ``user_message`` (with its ``parts``): the request's, or a
        ReAct observation standing in for it; after the host's tool results ``pending``
        (stored once the context is built) when it was sent beside them."""
        return await self._build(user_message, pending, continuation=False, parts=parts)

    async def for_continuation(self, pending: Sequence[ChatMessage] = ()) -> BuildResult:
        """A step that goes on after tool results, stored or ``pending`` (the host's,
        stored once the context is built): the history ends with them."""
        return await self._build("", pending, continuation=True)

    async def _build(
        self,
        user_message: str,
        pending: Sequence[ChatMessage],
        *,
        continuation: bool,
        parts: tuple[ContentPart, ...] = (),
    ) -> BuildResult:
        req = self._req
        budget = req.prompt_budget(self._max_prompt_tokens)
        fitted = budget
        if self._reserved_tokens:
            # At least 1: a reserve as large as the budget leaves only the required
            # parts, over the budget (and so refused under the refuse policy).
            fitted = max(budget - self._reserved_tokens, 1)
        if req.host_list_only:
            result = _prebuilt(
                req, fitted, self._blank_user_turns, self._steps, user_message, parts
            )
        else:
            turn = self._turn
            build = await self._builder.build(
                SessionBuildRequest(
                    caller=req.caller,
                    session_id=turn.session.id,
                    user_message=user_message,
                    user_parts=parts,
                    token_budget=fitted,
                    tokenizer=req.tokenizer,
                    scenario=req.scenario,
                    host=req.host,
                    variables=req.variables,
                    memory=req.memory,
                    cache_layout=req.cache_layout,
                    continuation=continuation,
                    pending=pending,
                    memory_query=turn.question,
                    blank_user_turns=self._blank_user_turns,
                    editing=req.editing,
                ),
                turn.session,
            )
            result = build.result
            self.layers = build.layers
        if req.refuse_over_limit and _trimmed(result.report):
            raise FailedPrecondition(
                f"{self._subject} does not fit max_prompt_tokens ({budget}); the turn was refused"
            )
        if result.report.total_tokens + self._reserved_tokens > self._max_prompt_tokens:
            # What must stay (the system prompt, the user message or the results continued
            # from) is over the server's limit: never sent, whatever the turn's policy.
            raise FailedPrecondition(
                f"{self._subject} needs {result.report.total_tokens} prompt tokens, over the "
                f"server's max_prompt_tokens ({self._max_prompt_tokens}); the turn was refused"
            )
        return result


def _prebuilt(
    req: ChatTurnRequest,
    budget: int,
    blank_user_turns: bool,
    steps: Sequence[ChatMessage],
    user_message: str,
    parts: tuple[ContentPart, ...],
) -> BuildResult:
    """The host's own list (leading system messages are the system prompt), then the
    step's ``user_message``: the request's, a ReAct observation, or none going on after
    tool results. With ``steps`` (the call's own, after its input) the request's user
    message is history, before them."""
    systems = 0
    while systems < len(req.messages) and req.messages[systems].role is Role.SYSTEM:
        systems += 1
    history = list(req.messages[systems:])
    if steps:
        if not is_blank(req.user_message) or req.user_parts:
            history.append(ChatMessage(Role.USER, req.user_message, parts=req.user_parts))
        history.extend(steps)
    return build_messages(
        BuildRequest(
            user_message=user_message,
            user_parts=parts,
            token_budget=budget,
            tokenizer=req.tokenizer,
            system_prompts=[m.content for m in req.messages[:systems]],
            history=history,
            cache_layout=req.cache_layout,
            blank_user_turns=blank_user_turns,
            editing=req.editing,
        )
    )


def _trimmed(report: BuildReport) -> bool:
    return report.required_over_budget or any(d.reason is DropReason.BUDGET for d in report.dropped)
