"""After a turn, memories: facts about the user from the turn's user message and answer
(``core.memory_facts``).

With a model that follows instructions the model extracts them, given the user's related
memories, and may name one each replaces; otherwise, or when the model fails or answers
badly, simple first-person patterns in the user's message do. Facts are the user's
current memories of no scope (``USER_FACTS``): those are what they are weighed against,
and what they write. New facts are added (``MemoryRepo`` deduplicates: a fact the user
already has is only refreshed); a new value supersedes the memory in place
(``MemoryHistoryRepo.replace``: same memory id, so hosts' ids stay valid and the
``memory`` layer never shows both the old and the new text), the old text kept as a
superseded memory, true until then, and in ``memory_history``. Every extracted memory gets a
history row naming its method (``rule-fallback`` or ``llm:<model>``), source session and
source message (the turn's user message).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from contextd.app.after_turn.model import ModelOrRules
from contextd.app.after_turn.work import (
    AfterTurnSettings,
    AfterTurnStats,
    Exchange,
    FinishedTurn,
    guarded,
    ids,
    log,
)
from contextd.app.memory_embedding import closest_memories
from contextd.app.scope import USER_FACTS
from contextd.core.memory_facts import (
    RULE_METHOD,
    Action,
    Decision,
    ExistingMemory,
    Fact,
    extraction_messages,
    llm_method,
    parse_facts,
    reconcile,
    rule_facts,
    rule_replaces,
)
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo


@dataclass(frozen=True, slots=True)
class MemoryExtraction:
    _memories: MemoryRepo
    _history: MemoryHistoryRepo
    _model: ModelOrRules
    _settings: AfterTurnSettings
    _stats: AfterTurnStats

    async def run(self, turn: FinishedTurn, exchange: Exchange) -> None:
        found = await self._facts(turn, exchange)
        if found is None:
            return
        facts, existing, method = found
        owner = (turn.tenant_id, turn.user_id)
        closest, thresholds = await closest_memories(self._memories, owner, [f.text for f in facts])
        decisions = reconcile(facts, existing, closest, thresholds)
        for decision in decisions:
            with guarded("memory write", turn, self._stats):
                await self._apply(turn, exchange, decision, method)
        self._memories.changed()  # a rewritten memory needs a new vector
        if decisions:
            log.info(
                "memories written",
                extra={
                    **ids(turn),
                    "method": method,
                    "decisions": [f"{d.action.value}: {d.fact.text}" for d in decisions],
                },
            )

    async def _facts(
        self, turn: FinishedTurn, exchange: Exchange
    ) -> tuple[list[Fact], list[ExistingMemory], str] | None:
        """The turn's facts, the related memories they were weighed against and the
        method that found them; None when the rules find none."""
        s = self._settings
        user_text = exchange.user.message.content
        if self._model.used:
            existing = await self._related(turn, [user_text])
            messages = extraction_messages(
                user_text,
                exchange.answer,
                [m.text for m in existing],
                max_facts=s.max_facts,
                max_chars=s.max_fact_chars,
            )
            read = functools.partial(parse_facts, max_facts=s.max_facts, max_chars=s.max_fact_chars)
            failure = "memory extraction by the model failed; using the rule fallback"
            parsed = await self._model.ask(turn, messages, read, failure)
            if parsed is not None:
                if parsed.rejected:
                    log.info(
                        "facts of the model left out",
                        extra={**ids(turn), "rejected": parsed.rejected},
                    )
                return parsed.facts, existing, llm_method(self._model.name)
        facts = rule_facts(user_text, max_facts=s.max_facts, max_chars=s.max_fact_chars)
        if not facts:
            return None
        existing = await self._related(turn, [f.text for f in facts])
        facts = [Fact(f.text, rule_replaces(f.text, existing)) for f in facts]
        return facts, existing, RULE_METHOD

    async def _related(self, turn: FinishedTurn, queries: Sequence[str]) -> list[ExistingMemory]:
        """The turn's user's memories most related to ``queries``, each once, best first."""
        found: dict[int, ExistingMemory] = {}
        limit = self._settings.related_memories
        for query in queries:
            hits = await self._memories.search(
                turn.user_id, query, limit, tenant_id=turn.tenant_id, memory_filter=USER_FACTS
            )
            for hit in hits:
                found.setdefault(hit.memory.id, ExistingMemory(hit.memory.id, hit.memory.content))
        return list(found.values())

    async def _apply(
        self, turn: FinishedTurn, exchange: Exchange, decision: Decision, method: str
    ) -> None:
        session_id, message_id = turn.session_id, exchange.user.id
        text = decision.fact.text
        if decision.action is Action.RESTATE and decision.target is not None:
            text = decision.target.text  # the same in other words: the memory is refreshed
        if decision.action is Action.UPDATE and decision.target is not None:
            done = await self._history.replace(
                decision.target.id,
                turn.user_id,
                decision.target.text,
                text,
                method,
                session_id,
                message_id,
                tenant_id=turn.tenant_id,
            )
            if done is not None:
                self._stats.fact_updated()
                return
            # The memory changed or went away since it was read: the fact is simply new.
        memory, created = await self._memories.add(
            turn.user_id, text, session_id, message_id, tenant_id=turn.tenant_id
        )
        if created:
            self._stats.fact_added()
            await self._history.record_add(memory, method)
        else:
            self._stats.fact_restated()
