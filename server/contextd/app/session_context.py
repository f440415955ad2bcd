"""Session-mode BuildMessages: the context layers of a stored conversation.

In order (docs/context.md): ``system`` (the server's identity and rules),
``scenario`` (the scenario's template and the host's skills), ``session`` (the
session's metadata), ``memory`` (the user's memories relevant to the message) and
``recent_sessions`` (summaries of the user's other recent sessions) make the system
message; ``window`` (the session's latest messages, with its compression summary)
and ``user_message`` follow. Over the budget the window goes first, oldest first,
then recent_sessions, then memory lowest ranked first; system, scenario, session
and user_message always stay.

With the stable-prefix cache layout, memory and recent_sessions (they change from
turn to turn) are a second system message after the window, right before
user_message, so that the system message and the window stay the same prefix from
one turn to the next; the budget rule is the same.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from contextd.app.scope import session_memories
from contextd.app.session_build_request import (
    BuiltContext,
    ContextLayer,
    LayerDefaults,
    SessionBuildRequest,
)
from contextd.app.sessions import SessionsApp
from contextd.core.build import build_messages
from contextd.core.build_request import (
    BuildReport,
    BuildRequest,
    BuildResult,
    CacheLayout,
)
from contextd.core.errors import SessionNotFound, Violations, shown
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import DroppedRange, DropReason, is_blank
from contextd.core.system_prompt import NO_SCENARIO, MissingVariables, render
from contextd.core.tokens import Tokenizer, message_tokens
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.store.catalog import CatalogRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import PromptTemplate, Session, Skill, StoredMessage
from contextd.store.sessions import SessionSnapshot, SessionSnapshots
from contextd.store.summaries import SummaryRepo
from contextd.tracing import spans

log = logging.getLogger("contextd.context")

MEMORY_HEADER = "## What you know about the user"
RECENT_HEADER = "## The user's recent conversations"
FIRST_WINDOW = 64  # messages fetched first; grows 4x while the budget has room
MAX_LIMIT = 50


@dataclass(slots=True)
class _Section:
    """Items of the memory or recent_sessions layer, best first; ``kept`` of them fit the budget."""

    layer: ContextLayer
    header: str
    lines: list[str]
    kept: int = 0

    def text(self) -> str:
        if not self.kept:
            return ""
        return "\n".join([self.header, *self.lines[: self.kept]])


class SessionContextBuilder:
    def __init__(
        self,
        defaults: LayerDefaults,
        sessions: SessionsApp,
        catalog: CatalogRepo,
        memories: MemoryRepo,
        summaries: SummaryRepo,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        self.defaults = defaults
        self._metrics = metrics
        self.sessions = sessions
        self.catalog = catalog
        self.memories = memories
        self.summaries = summaries
        # The session with what its build reads alongside, in one round trip where
        # replicas share the database.
        self.snapshots = SessionSnapshots(
            sessions.sessions.db, sessions.sessions, sessions.conversation, summaries
        )

    async def build_messages(self, req: SessionBuildRequest) -> BuiltContext:
        """BuildMessages from the stored session the request names, traced and counted
        like every BuildMessages (a chat turn's builds, through ``build``, are not)."""
        with spans.span("contextd.build_messages"):
            built = await self.build(req)
        if self._metrics.enabled:
            report = built.result.report
            self._metrics.built(report.total_tokens, report.dropped)
        return built

    async def build(self, req: SessionBuildRequest, session: Session | None = None) -> BuiltContext:
        """Build from the stored session. ``session``: the session ``req`` names, when the
        caller has read it already (through SessionsApp.get, so its owner is checked)."""
        with spans.span("contextd.session_context"):
            return await self._build(req, session)

    async def _build(self, req: SessionBuildRequest, session: Session | None) -> BuiltContext:
        _validate(req)
        snapshot = await self._snapshot(req, session)
        session = snapshot.session
        tok = req.tokenizer
        scenario = req.scenario or session.scenario
        host = (req.host or session.host).lower()

        system_layer = ContextLayer("system")
        base = _join([self.defaults.identity, self.defaults.rules])
        _mark(system_layer, base, tok)
        scenario_layer, scenario_text = await self._scenario(
            req.caller.tenant_id, scenario, host, req.variables, snapshot.catalog_version
        )
        scenario_layer.tokens = tok.count(scenario_text)
        session_layer = ContextLayer("session")
        session_text = _session_text(session)
        _mark(session_layer, session_text, tok)
        memory, recent = await self._remembered(req, snapshot)

        user_tokens = (
            0
            if is_blank(req.user_message)
            else message_tokens(ChatMessage(Role.USER, req.user_message, parts=req.user_parts), tok)
        )
        fixed = _join([base, scenario_text, session_text])
        available = (
            req.token_budget - message_tokens(ChatMessage(Role.SYSTEM, fixed), tok) - user_tokens
        )
        stable_prefix = req.cache_layout is CacheLayout.STABLE_PREFIX
        if stable_prefix and (memory.lines or recent.lines):
            available -= tok.message_overhead  # their own message
        for section in (memory, recent):  # memory first: recent_sessions is dropped first
            available = _fit(section, available, tok)

        window_layer = ContextLayer("window")
        while True:
            volatile = _join([memory.text(), recent.text()])
            result, fetched, total = await self._build_window(req, snapshot, fixed, volatile)
            if result.report.required_over_budget and (recent.kept or memory.kept):
                # Joined sections can count a token or two more than their parts.
                section = recent if recent.kept else memory
                section.kept -= 1
                continue
            break

        for section in (memory, recent):
            layer = section.layer
            layer.included = section.kept > 0
            layer.items_kept = section.kept
            layer.items_dropped = len(section.lines) - section.kept
            layer.tokens = tok.count(section.text())
        report = result.report
        window_layer.included = report.history_kept > 0 or report.summary_included
        window_layer.items_kept = report.history_kept
        window_layer.items_dropped = total - report.history_kept
        window_layer.tokens = report.history_tokens + report.summary_tokens
        user_layer = ContextLayer(
            "user_message", user_tokens > 0, user_tokens, int(user_tokens > 0)
        )
        _to_session_positions(report, first_seq=total - fetched)
        # In the order of the message list.
        volatile_layers = [memory.layer, recent.layer]
        if stable_prefix:
            middle = [window_layer, *volatile_layers]
        else:
            middle = [*volatile_layers, window_layer]
        layers = [system_layer, scenario_layer, session_layer, *middle, user_layer]
        return BuiltContext(result, layers)

    async def _snapshot(self, req: SessionBuildRequest, known: Session | None) -> SessionSnapshot:
        """The session ``req`` names (``known``: when the caller read it already, through
        SessionsApp.get), with what the build reads alongside it."""
        enabled = self.defaults.memory_enabled if req.memory is None else req.memory
        recent = req.recent_sessions_limit or self.defaults.recent_sessions_limit
        snapshot = await self.snapshots.read(
            req.session_id,
            tenant_id=req.caller.tenant_id,
            tokenizer=req.tokenizer.name,
            window=FIRST_WINDOW,
            user_id=req.caller.user_id,
            recent=recent if enabled else 0,
            known=known,
        )
        # Another tenant's session is not found: its existence is not revealed.
        if snapshot is None or not req.caller.owns(snapshot.session.user_id):
            raise SessionNotFound(req.session_id)
        return snapshot

    async def _scenario(
        self,
        tenant_id: str,
        scenario: str,
        host: str,
        variables: Mapping[str, str],
        catalog_version: int | None,
    ) -> tuple[ContextLayer, str]:
        layer = ContextLayer("scenario")
        missing = MissingVariables()
        parts: list[str] = []
        template = await self._template(tenant_id, scenario, host, layer, catalog_version)
        if template is not None:
            parts.append(render(template.system_prompt, variables, missing, "the template"))
        listed = await self.catalog.list_skills(
            host or None, True, tenant_id=tenant_id, version=catalog_version
        )
        skills = [s for s in listed if _for(s, host)]
        if skills:
            texts = [_skill_text(s, variables, missing) for s in skills]
            parts.append("## Skills\n\n" + "\n\n".join(texts))
        v = Violations()
        missing.report(v, "session.variables")
        v.raise_if_any()
        layer.items_kept = len(skills) + (template is not None)
        layer.included = bool(parts)
        return layer, _join(parts)

    async def _template(
        self, tenant_id: str, scenario: str, host: str, layer: ContextLayer, version: int | None
    ) -> PromptTemplate | None:
        """The enabled template of the scenario; without one, that of the scenario named
        like the host (ignoring case), if there is one. ``NO_SCENARIO`` asks for none."""
        if scenario == NO_SCENARIO:
            return None
        if scenario:
            template = await self.catalog.get_template(
                scenario, tenant_id=tenant_id, version=version
            )
            if template is None or not template.enabled:
                layer.note = f"no enabled prompt template for scenario {shown(scenario)}"
                return None
            return template
        if not host:
            return None
        template = await self.catalog.get_template(
            host, tenant_id=tenant_id, any_case=True, version=version
        )
        if template is None or not template.enabled:
            return None
        layer.note = f"scenario {template.scenario!r}, named like the host"
        return template

    async def _remembered(
        self, req: SessionBuildRequest, snapshot: SessionSnapshot
    ) -> tuple[_Section, _Section]:
        session = snapshot.session
        memory = _Section(ContextLayer("memory"), MEMORY_HEADER, [])
        recent = _Section(ContextLayer("recent_sessions"), RECENT_HEADER, [])
        enabled = self.defaults.memory_enabled if req.memory is None else req.memory
        if not enabled:
            note = "memory is off" + ("" if req.memory is None else " for this request")
            memory.layer.note = recent.layer.note = note
            return memory, recent
        try:
            searched = await self.memories.search_noted(
                req.caller.user_id,
                req.user_message if req.memory_query is None else req.memory_query,
                req.memory_limit or self.defaults.memory_limit,
                tenant_id=req.caller.tenant_id,
                memory_filter=session_memories(req.host or session.host),
                stored=snapshot.memories_stored,
            )
        except Exception as error:  # degrade: a memory failure never fails the build
            log.warning("memory unavailable, building without it", exc_info=True)
            memory.layer.note = recent.layer.note = f"memory unavailable: {type(error).__name__}"
            return memory, recent
        memory.lines = [f"- {m.memory.content}" for m in searched.found]
        memory.layer.memories = [(m.memory.content, m.score) for m in searched.found]
        memory.layer.note = searched.note
        recent.lines = [
            f"- {s.title}: {s.summary}" if s.title else f"- {s.summary}" for s in snapshot.recent
        ]
        return memory, recent

    async def _build_window(
        self, req: SessionBuildRequest, snapshot: SessionSnapshot, system: str, volatile: str
    ) -> tuple[BuildResult, int, int]:
        """Build with the newest stored messages, fetching more while the budget has room;
        ``system``: the stable layers' text, ``volatile``: memory and recent_sessions.

        Returns the result, how many messages were fetched and the session's total.
        """
        tok = req.tokenizer
        session = snapshot.session
        active = await self.summaries.active_compression(session.id, version=snapshot.version)
        summary = (
            CompressionSummary(
                tuple(str(i) for i in active.message_ids),
                str(active.start_message_id),
                active.summary,
            )
            if active is not None
            else None
        )
        pending = list(req.pending)
        pending_counts = [message_tokens(m, tok) for m in pending]
        limit = FIRST_WINDOW
        while True:
            rows = await self.sessions.conversation.tail(
                session.id, limit, tok.name, tenant_id=session.tenant_id, version=snapshot.version
            )
            counts = await self._counts(session, rows, tok) + pending_counts
            result = build_messages(
                BuildRequest(
                    user_message=req.user_message,
                    user_parts=req.user_parts,
                    token_budget=req.token_budget,
                    tokenizer=tok,
                    system_prompts=[system],
                    volatile_prompt=volatile,
                    cache_layout=req.cache_layout,
                    history=[*(r.message for r in rows), *pending],
                    compression_summary=summary,
                    output_format=req.output_format,
                    overflow_policy=req.overflow_policy,
                    history_tokens=counts,
                    history_trusted=True,
                    blank_user_turns=req.blank_user_turns,
                    editing=req.editing,
                )
            )
            total = rows[-1].seq + 1 if rows else 0
            # Older messages cannot be kept once the budget is full or the compression
            # summary has replaced them (it covers the session's older part). Clearing
            # replays every message the summary does not cover (core/editing), so then
            # only the summary ends the reading.
            ends = _SUMMARY_ONLY if req.editing.clearing else _BUDGET_OR_SUMMARY
            full = any(d.reason in ends for d in result.report.dropped)
            if full or len(rows) >= total:
                return result, len(rows), total
            limit *= 4

    async def _counts(
        self, session: Session, rows: Sequence[StoredMessage], tok: Tokenizer
    ) -> list[int]:
        """Stored counts, counting (and storing) the ones this tokenizer has not seen."""
        counts: list[int] = []
        missing: list[tuple[int, str, int]] = []
        for row in rows:
            n = row.tokens.get(tok.name)
            if n is None:
                n = message_tokens(row.message, tok)
                missing.append((row.id, tok.name, n))
            counts.append(n)
        if missing:
            await self.sessions.conversation.save_tokens(
                missing, session.id, tenant_id=session.tenant_id
            )
        return counts


_BUDGET_OR_SUMMARY = frozenset({DropReason.BUDGET, DropReason.COMPRESSED})
_SUMMARY_ONLY = frozenset({DropReason.COMPRESSED})


def _validate(req: SessionBuildRequest) -> None:
    v = Violations()
    if is_blank(req.user_message) and not req.continuation:
        v.add("user_message", "required in session mode")
    if req.token_budget <= 0:
        v.add("token_budget", "must be a positive number of tokens")
    if not 0 <= req.memory_limit <= MAX_LIMIT:
        v.add("session.memory_limit", f"between 0 and {MAX_LIMIT}")
    if not 0 <= req.recent_sessions_limit <= MAX_LIMIT:
        v.add("session.recent_sessions_limit", f"between 0 and {MAX_LIMIT}")
    if not req.session_id:
        v.add("session.session_id", "required")
    v.raise_if_any()


def _fit(section: _Section, available: int, tok: Tokenizer) -> int:
    """Keep the best items that fit, in rank order; return the budget left."""
    if not section.lines:
        return available
    cost = tok.count("\n\n" + section.header)
    for line in section.lines:
        cost += tok.count("\n" + line)
        if cost > available:
            break
        section.kept += 1
    spent = tok.count("\n\n" + section.text()) if section.kept else 0
    return available - spent


def _skill_text(skill: Skill, variables: Mapping[str, str], missing: MissingVariables) -> str:
    prompt = render(skill.prompt, variables, missing, f"skill {skill.name!r}")
    return _join([f"### {skill.name}", skill.description, prompt], "\n")


def _for(skill: Skill, host: str) -> bool:
    # Without a host, only skills meant for every host apply.
    return not skill.apps or (bool(host) and host in skill.apps)


def _session_text(session: Session) -> str:
    lines = [f"Title: {session.title}"] if session.title else []
    lines += [f"{key}: {value}" for key, value in sorted(session.metadata.items())]
    return "## Session\n" + "\n".join(lines) if lines else ""


def _join(parts: Sequence[str], separator: str = "\n\n") -> str:
    return separator.join(p for p in parts if not is_blank(p))


def _mark(layer: ContextLayer, text: str, tok: Tokenizer) -> None:
    layer.included = bool(text)
    layer.items_kept = 1 if text else 0
    layer.tokens = tok.count(text)


def _to_session_positions(report: BuildReport, first_seq: int) -> None:
    """The report's window indexes as positions in the session, the one index space
    of its dropped ranges, removed tool calls and moved tool results."""
    report.dropped = _session_positions(report.dropped, first_seq)
    if not first_seq:
        return
    report.removed_tool_calls = [
        replace(r, index=r.index + first_seq) for r in report.removed_tool_calls
    ]
    report.moved_tool_results = [
        replace(m, from_index=m.from_index + first_seq, call_index=m.call_index + first_seq)
        for m in report.moved_tool_results
    ]
    report.edits = [replace(e, index=e.index + first_seq) for e in report.edits]


def _session_positions(dropped: list[DroppedRange], first_seq: int) -> list[DroppedRange]:
    """Window indices to positions in the session; older, unfetched messages are one
    budget range."""
    shifted = [replace(d, start_index=d.start_index + first_seq) for d in dropped]
    if first_seq == 0:
        return shifted
    if shifted and shifted[0].reason is DropReason.BUDGET and shifted[0].start_index == first_seq:
        shifted[0] = replace(shifted[0], start_index=0, count=shifted[0].count + first_seq)
        return shifted
    return [DroppedRange(0, first_seq, DropReason.BUDGET), *shifted]
