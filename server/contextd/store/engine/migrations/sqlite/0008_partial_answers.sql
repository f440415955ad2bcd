-- 0008_partial_answers: the answer a running chat turn has streamed so far, one row per
-- session while its turn runs. The row is written when the turn stores its input, its
-- text replaced at most once a second while a model step streams, and deleted in the
-- transaction that stores the turn's answer. A row found at start is a turn the server's
-- end cut off: it is stored as an interrupted answer (app/interrupted_turns.py).
-- Times are Unix seconds; usage is the turn's so far, as far as it is known.

CREATE TABLE partial_answers (
    session_id             TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id              TEXT NOT NULL DEFAULT 'default',
    turn_index             INTEGER NOT NULL,
    step                   INTEGER NOT NULL DEFAULT 0,  -- the model step the text is of
    text                   TEXT NOT NULL DEFAULT '',
    tokenizer              TEXT NOT NULL DEFAULT '',  -- the turn's, to count the text with
    prompt_tokens          INTEGER NOT NULL DEFAULT 0,
    completion_tokens      INTEGER NOT NULL DEFAULT 0,
    prompt_tokens_estimate INTEGER NOT NULL DEFAULT 0,
    started_at             REAL NOT NULL,
    updated_at             REAL NOT NULL
);
