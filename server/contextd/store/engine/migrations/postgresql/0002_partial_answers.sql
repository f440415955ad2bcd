-- 0002_partial_answers: SQLite's 0008 (read it for what the rows mean), in PostgreSQL's types.

CREATE TABLE partial_answers (
    session_id             TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id              TEXT NOT NULL DEFAULT 'default',
    turn_index             BIGINT NOT NULL,
    step                   INTEGER NOT NULL DEFAULT 0,
    text                   TEXT NOT NULL DEFAULT '',
    tokenizer              TEXT NOT NULL DEFAULT '',
    prompt_tokens          BIGINT NOT NULL DEFAULT 0,
    completion_tokens      BIGINT NOT NULL DEFAULT 0,
    prompt_tokens_estimate BIGINT NOT NULL DEFAULT 0,
    started_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);
