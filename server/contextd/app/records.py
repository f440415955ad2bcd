"""The records the apps hand their callers and take from them, by name: a front reads
them here and converts them to its protocol, never reaching into the store."""

from contextd.store.memory.history import MemoryChange
from contextd.store.memory.versions import MemoryDetails, MemoryEdit
from contextd.store.models import (
    Memory,
    PromptTemplate,
    ScoredMemory,
    Session,
    Skill,
    StoredMessage,
)

__all__ = [
    "Memory",
    "MemoryChange",
    "MemoryDetails",
    "MemoryEdit",
    "PromptTemplate",
    "ScoredMemory",
    "Session",
    "Skill",
    "StoredMessage",
]
