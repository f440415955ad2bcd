"""The records the apps hand their callers and take from them, by name: a front reads
them here and converts them to its protocol, never reaching into the store."""

# Each named again (``X as X``): what this module exports, for the fronts.
from contextd.store.memory.history import MemoryChange as MemoryChange
from contextd.store.memory.versions import MemoryDetails as MemoryDetails
from contextd.store.memory.versions import MemoryEdit as MemoryEdit
from contextd.store.models import Memory as Memory
from contextd.store.models import PromptTemplate as PromptTemplate
from contextd.store.models import ScoredMemory as ScoredMemory
from contextd.store.models import Session as Session
from contextd.store.models import Skill as Skill
from contextd.store.models import StoredMessage as StoredMessage
