"""The system prompt of a build: its text from the request's system prompts or layers,
and, with the stable-prefix cache layout, its volatile part (what changes from turn to
turn) apart, as a second system message after the history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from contextd.core.build_request import BuildReport, BuildRequest, CacheLayout
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank
from contextd.core.prompt import LAYER_SEPARATOR, assemble_system_prompt, report_layers
from contextd.core.tokens import message_tokens

# Enum members read once: looked up on the class per call, they show up in the
# BuildMessages benchmark.
_SYSTEM = Role.SYSTEM
_STABLE_PREFIX = CacheLayout.STABLE_PREFIX


def system_text(req: BuildRequest) -> str:
    """The whole system prompt, volatile part included, as the default layout sends it."""
    if req.layers is not None:
        return assemble_system_prompt(req.layers)
    return _join_volatile(join_system_prompts(req.system_prompts), req.volatile_prompt)


def _split_system_text(req: BuildRequest) -> tuple[str, str]:
    """The system prompt's stable and volatile parts: the volatile prompt, and of
    ``layers`` the memory and context layers (they change from turn to turn)."""
    layers = req.layers
    if layers is None:
        return join_system_prompts(req.system_prompts), req.volatile_prompt
    stable = replace(layers, memory="", context="")
    volatile = LAYER_SEPARATOR.join(t for t in (layers.memory, layers.context) if not is_blank(t))
    return assemble_system_prompt(stable), _join_volatile(volatile, req.volatile_prompt)


def _join_volatile(stable: str, volatile: str) -> str:
    if is_blank(volatile):
        return stable
    return f"{stable}{LAYER_SEPARATOR}{volatile}" if stable else volatile


def join_system_prompts(prompts: Sequence[str]) -> str:
    # Several system prompts become one, a single newline apart; blank ones are left out.
    return "\n".join([p for p in prompts if not is_blank(p)])


def system_messages(
    req: BuildRequest, report: BuildReport
) -> tuple[ChatMessage | None, ChatMessage | None, int]:
    """The system prompt and, with the stable-prefix layout, its volatile part apart
    (each None when there is none; their layers reported) and the volatile part's
    tokens. ``system_tokens`` counts both."""
    if req.layers is not None:
        report.layers = report_layers(req.layers, req.tokenizer)
    if req.cache_layout is _STABLE_PREFIX:
        stable, volatile = _split_system_text(req)
    else:
        stable, volatile = system_text(req), ""
    system_msg = volatile_msg = None
    if stable:
        system_msg = ChatMessage(_SYSTEM, stable)
        report.system_tokens = message_tokens(system_msg, req.tokenizer)
    volatile_tokens = 0
    if not is_blank(volatile):
        volatile_msg = ChatMessage(_SYSTEM, volatile)
        volatile_tokens = message_tokens(volatile_msg, req.tokenizer)
        report.system_tokens += volatile_tokens
    return system_msg, volatile_msg, volatile_tokens


def volatile_in_system(req: BuildRequest) -> bool:
    """Whether the default layout's system message holds text that changes next turn."""
    layers = req.layers
    if layers is not None and not (is_blank(layers.memory) and is_blank(layers.context)):
        return True
    return not is_blank(req.volatile_prompt)
