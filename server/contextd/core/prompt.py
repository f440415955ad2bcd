"""The six-layer system prompt: identity, rules, skill, mode, memory, context."""

from __future__ import annotations

from dataclasses import dataclass

from contextd.core.errors import InvalidArgument
from contextd.core.tokens import Tokenizer

LAYER_NAMES: tuple[str, ...] = ("identity", "rules", "skill", "mode", "memory", "context")
LAYER_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class PromptLayers:
    identity: str
    rules: str = ""
    skill: str = ""
    mode: str = ""
    memory: str = ""
    context: str = ""

    def in_order(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, getattr(self, name)) for name in LAYER_NAMES)


@dataclass(frozen=True, slots=True)
class LayerReport:
    name: str
    included: bool
    tokens: int


def _is_blank(text: str) -> bool:
    return not text.strip()


def assemble_system_prompt(layers: PromptLayers, field: str = "layers") -> str:
    """Join the non-blank layers in their fixed order with a blank line between them."""
    if _is_blank(layers.identity):
        raise InvalidArgument.one(f"{field}.identity", "identity is required and must not be blank")
    return LAYER_SEPARATOR.join(text for _, text in layers.in_order() if not _is_blank(text))


def report_layers(layers: PromptLayers, tokenizer: Tokenizer) -> list[LayerReport]:
    return [
        LayerReport(name, False, 0)
        if _is_blank(text)
        else LayerReport(name, True, tokenizer.count(text))
        for name, text in layers.in_order()
    ]
