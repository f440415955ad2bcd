-- 0001_core: sessions, their conversation and token counts, summaries, prompt templates, skills.
-- Timestamps are REAL unix seconds; JSON values are TEXT.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL,
    scenario      TEXT NOT NULL DEFAULT '',
    host          TEXT NOT NULL DEFAULT '',
    title         TEXT NOT NULL DEFAULT '',
    metadata      TEXT NOT NULL DEFAULT '{}',  -- JSON object of string values (session layer)
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0
);

-- A user's sessions, newest first: SessionRepo.list_sessions pages on the key (updated_at, id).
CREATE INDEX sessions_user_updated ON sessions (user_id, updated_at DESC, id DESC);

CREATE TABLE conversation (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: summaries and memories cite it
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL,
    seq          INTEGER NOT NULL CHECK (seq >= 0),  -- position in the session: 0, 1, 2, ...
    role         TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content      TEXT NOT NULL DEFAULT '',
    tool_calls   TEXT,  -- JSON list of {"id", "name", "arguments"}, NULL when none
    tool_call_id TEXT NOT NULL DEFAULT '',
    turn_index   INTEGER NOT NULL DEFAULT 0,
    is_collected INTEGER NOT NULL DEFAULT 0 CHECK (is_collected IN (0, 1)),
    status       TEXT NOT NULL DEFAULT '',  -- '' complete; 'partial', 'cancelled', 'error'
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);

-- UNIQUE (session_id, seq), named so query plans read well. Serves paging, the rolling
-- window (tail: newest N by seq, cost follows N) and the cascade from sessions.
CREATE UNIQUE INDEX conversation_session_seq ON conversation (session_id, seq);

-- Every stored message counts once in its session: message_count and updated_at follow the
-- inserts in the same statement, so ConversationRepo.append needs no extra round trip.
CREATE TRIGGER conversation_after_insert AFTER INSERT ON conversation
BEGIN
    UPDATE sessions
    SET message_count = message_count + 1,
        updated_at = max(updated_at, NEW.created_at)
    WHERE id = NEW.session_id;
END;

-- Each message's token count per tokenizer, computed once when it is stored, so trimming a
-- long history never tokenizes it again.
CREATE TABLE message_tokens (
    message_id INTEGER NOT NULL REFERENCES conversation (id) ON DELETE CASCADE,
    tokenizer  TEXT NOT NULL,
    tokens     INTEGER NOT NULL CHECK (tokens >= 0),
    PRIMARY KEY (message_id, tokenizer)
) WITHOUT ROWID;

-- A summary that stands in for the messages it compressed; one active per session.
CREATE TABLE compression_summaries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    message_ids      TEXT NOT NULL DEFAULT '[]',  -- JSON list of conversation ids
    start_message_id INTEGER NOT NULL,
    summary          TEXT NOT NULL,
    active           INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
    created_at       REAL NOT NULL
);

CREATE INDEX compression_summaries_session ON compression_summaries (session_id, id);
CREATE UNIQUE INDEX compression_summaries_one_active
    ON compression_summaries (session_id) WHERE active = 1;

-- A summary per session, read for the user's recent other sessions (recent_sessions layer).
CREATE TABLE session_summaries (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    summary    TEXT NOT NULL,
    updated_at REAL NOT NULL
);

CREATE INDEX session_summaries_user_updated ON session_summaries (user_id, updated_at DESC);

-- The scenario layer's prompt per scenario (server-wide, not per user).
CREATE TABLE prompt_templates (
    scenario      TEXT PRIMARY KEY,
    system_prompt TEXT NOT NULL,
    version       INTEGER NOT NULL DEFAULT 1,
    enabled       INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    updated_at    REAL NOT NULL
);

-- The scenario layer's skills (server-wide); apps is a JSON list of hosts, [] meaning every host.
CREATE TABLE skills (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    prompt      TEXT NOT NULL DEFAULT '',
    apps        TEXT NOT NULL DEFAULT '[]',
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    updated_at  REAL NOT NULL
);
