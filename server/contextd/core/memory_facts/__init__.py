"""What contextd writes to memory after a chat turn: atomic facts and summaries.

Pure text work, no I/O; ``contextd.app.after_turn`` runs it and stores the results.

Facts (``facts``, ``extraction``, ``rules``)
    With a model: :func:`extraction_messages` asks for ``{"facts": [{"text": ...,
    "replaces": ...}]}`` given the user's related memories, and :func:`parse_facts` reads
    the answer strictly (one JSON object, optionally inside one code fence; anything else
    is refused whole) and validates every item (a string text, at most ``max_chars``
    characters once whitespace is collapsed, at most ``max_facts`` items).
    Without one (the offline echo provider, or when the model's answer is unusable):
    :func:`rule_facts` finds simple first-person statements in the user's message, in
    Chinese and English ("我喜欢…", "我叫…", "I like…", "my name is…", "I prefer…",
    "I live in…", and a few more), never in the assistant's answer, never in a question.
    Its memories are labelled ``rule-fallback`` in the memory history; a model's
    ``llm:<model>``.

Reconciliation (``reconciliation``)
    :func:`reconcile` decides per fact: ADD (new), RESTATE (the user already has it: it is
    stored again, which only refreshes its recency) or UPDATE (it replaces one of the
    related memories). A model names the memory it replaces by its text; a memory it was
    not shown is never replaced. The rule fallback replaces by slot
    (:func:`rule_replaces`): a new name, home town, age, job... replaces the old one, and a
    preference replaces its opposite ("I don't like tea" replaces "I like tea").

Summaries (``summaries``)
    The recent_sessions context layer shows the user's recent sessions by their summary; a
    session's compression summary stands in for its older messages. Both are written by a
    model (:func:`session_summary_messages`, :func:`compression_messages`, cleaned by
    :func:`clean_summary`) or, without one, extracted and labelled as such
    (:func:`extractive_session_summary`, :func:`extractive_compression`).
    :func:`plan_compression` decides when and up to where a session is compressed.

The text helpers all of them share are in ``text``.
"""

from contextd.core.memory_facts.extraction import (
    MAX_PROMPT_ANSWER_CHARS,
    MAX_PROMPT_MEMORY_CHARS,
    MAX_REPLACES_CHARS,
    FactsParseError,
    ParsedFacts,
    extraction_messages,
    parse_facts,
)
from contextd.core.memory_facts.facts import (
    DEFAULT_MAX_FACT_CHARS,
    DEFAULT_MAX_FACTS,
    RULE_METHOD,
    ExistingMemory,
    Fact,
    clean_fact_text,
    llm_method,
)
from contextd.core.memory_facts.reconciliation import Action, Decision, reconcile
from contextd.core.memory_facts.rules import (
    MAX_NAME_CHARS,
    POLARITY,
    SINGLE_VALUED,
    Statement,
    parse_statement,
    rule_facts,
    rule_replaces,
)
from contextd.core.memory_facts.summaries import (
    CompressionPlan,
    Line,
    SummaryError,
    clean_summary,
    compression_messages,
    extractive_compression,
    extractive_session_summary,
    plan_compression,
    session_summary_messages,
)
from contextd.core.memory_facts.text import (
    MAX_OUTPUT_CHARS,
    MAX_PROMPT_USER_CHARS,
    is_chinese,
    language_hint,
    one_line,
    script_counts,
    shorten,
    unfence,
)

__all__ = [
    "DEFAULT_MAX_FACTS",
    "DEFAULT_MAX_FACT_CHARS",
    "MAX_NAME_CHARS",
    "MAX_OUTPUT_CHARS",
    "MAX_PROMPT_ANSWER_CHARS",
    "MAX_PROMPT_MEMORY_CHARS",
    "MAX_PROMPT_USER_CHARS",
    "MAX_REPLACES_CHARS",
    "POLARITY",
    "RULE_METHOD",
    "SINGLE_VALUED",
    "Action",
    "CompressionPlan",
    "Decision",
    "ExistingMemory",
    "Fact",
    "FactsParseError",
    "Line",
    "ParsedFacts",
    "Statement",
    "SummaryError",
    "clean_fact_text",
    "clean_summary",
    "compression_messages",
    "extraction_messages",
    "extractive_compression",
    "extractive_session_summary",
    "is_chinese",
    "language_hint",
    "llm_method",
    "one_line",
    "parse_facts",
    "parse_statement",
    "plan_compression",
    "reconcile",
    "rule_facts",
    "rule_replaces",
    "script_counts",
    "session_summary_messages",
    "shorten",
    "unfence",
]
