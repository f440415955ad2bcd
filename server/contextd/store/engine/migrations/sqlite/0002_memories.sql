-- 0002_memories: a user's atomic memories (memory layer) and their full-text index.
-- Memories belong to a user, not to a session: they outlive the session they came from, so
-- source_session_id / source_message_id are provenance only, without foreign keys.

CREATE TABLE memories (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: clients keep ids
    user_id           TEXT NOT NULL,
    content           TEXT NOT NULL,
    content_hash      TEXT NOT NULL,  -- search_terms.content_hash(content): 32 hex digits
    source_session_id TEXT NOT NULL DEFAULT '',
    source_message_id INTEGER NOT NULL DEFAULT 0,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,  -- stating a memory again moves it here
    UNIQUE (user_id, content_hash)
);

-- A user's memories, newest first: MemoryRepo.list_memories pages on the key (created_at, id).
CREATE INDEX memories_user_created ON memories (user_id, created_at DESC, id DESC);

-- The search index, rowid = memories.id. Each row holds the memory's terms
-- (contextd.core.search_terms.index_terms: words, and single characters and bigrams of
-- Chinese/Japanese/Korean/Thai runs), each term prefixed with a 16-hex-digit key of the
-- user, separated by spaces. The 'ascii' tokenizer splits only at ASCII spaces and
-- punctuation, so it keeps every term as one token, exactly as Python made it.
-- * Per-user terms: a query for one user reads only that user's posting lists. A shared
--   "user token" ANDed into the query costs a seek in a list as long as the user's
--   memories for every hit (bench/README.md, memory_search.py, has the measurements).
-- * Contentless: the terms are not stored a second time (10 MB instead of 47 MB of index
--   for 105,000 memories). A delete must therefore give the terms again; MemoryRepo
--   recomputes them from the content. Delete memories only through MemoryRepo.
-- * detail=full: bm25() of a contentless table with detail=column or none is always 0.
CREATE VIRTUAL TABLE memories_fts USING fts5(
    terms,
    tokenize = 'ascii',
    detail = full,
    content = ''
);

-- Per-user document frequency of each term: a query looks up its rarest terms first and
-- leaves out the terms that would make it rank tens of thousands of rows.
CREATE VIRTUAL TABLE memories_fts_vocab USING fts5vocab(memories_fts, 'row');

-- Which version of search_terms built the index (search_terms.TERMS_VERSION). MemoryRepo
-- rebuilds the index when it differs, before it searches, adds or deletes.
CREATE TABLE memories_fts_state (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    terms_version INTEGER NOT NULL
);

INSERT INTO memories_fts_state (id, terms_version) VALUES (1, 1);
