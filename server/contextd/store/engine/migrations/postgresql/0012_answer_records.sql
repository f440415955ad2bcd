-- 0012_answer_records: SQLite's 0017 (read it for why).
CREATE TABLE answer_records (
    message_id             BIGINT PRIMARY KEY REFERENCES conversation (id) ON DELETE CASCADE,
    model                  TEXT NOT NULL,
    prompt_tokens          BIGINT NOT NULL,
    completion_tokens      BIGINT NOT NULL,
    prompt_tokens_estimate BIGINT NOT NULL,
    cache_read_tokens      BIGINT NOT NULL,
    cache_write_tokens     BIGINT NOT NULL,
    estimated              INTEGER NOT NULL,
    note                   TEXT NOT NULL
);
