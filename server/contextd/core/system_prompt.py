"""The system prompt of a build: its text from the request's system prompts or layers,
and, with the stable-prefix cache layout, its volatile part (what changes from turn to
turn) apart, as a second system message after the history; the {{variable}}
placeholders of the prompt templates and skills it is made from."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from contextd.core.build_request import BuildReport, BuildRequest, CacheLayout
from contextd.core.errors import Violations
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


# {{variable}} placeholders in prompt templates and skills.
# The scenario a session or request names to have no template at all, not even the one
# of the scenario named like its host; no template can have this name.
NO_SCENARIO = "-"

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")


def placeholders(template: str) -> list[str]:
    """Variable names a template uses, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(template)))


class MissingVariables:
    """Variables without a value, each with the texts that need it.

    The template and several skills can need the same variable; the caller gets one
    violation per variable that names all of them, not one per text.
    """

    def __init__(self) -> None:
        self._needed_by: dict[str, list[str]] = {}

    def note(self, name: str, needed_by: str) -> None:
        users = self._needed_by.setdefault(name, [])
        if needed_by not in users:
            users.append(needed_by)

    def report(self, violations: Violations, field: str) -> None:
        """One violation ``field.<name>`` per missing variable, in order of first use."""
        for name, users in self._needed_by.items():
            violations.add(f"{field}.{name}", f"no value; needed by {_listed(users)}")


def render(
    template: str, variables: Mapping[str, str], missing: MissingVariables, needed_by: str
) -> str:
    """Fill every placeholder; a variable with no value is noted in ``missing`` as needed
    by ``needed_by`` (such as ``the template`` or ``skill 'sumif'``) and left as it is."""
    for name in placeholders(template):
        if name not in variables:
            missing.note(name, needed_by)
    return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), template)


def _listed(users: list[str]) -> str:
    if len(users) == 1:
        return users[0]
    return ", ".join(users[:-1]) + " and " + users[-1]
