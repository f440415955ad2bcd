-- 0017_answer_records: what a StreamChat call's stored answer was, beside the message
-- it ended with: the model it asked for, the turn's usage up to that answer, and the
-- host's note (answer_note: what it wants to show of the answer later). Written with
-- the answer, in its transaction; gone with the message.
CREATE TABLE answer_records (
    message_id             INTEGER PRIMARY KEY REFERENCES conversation (id) ON DELETE CASCADE,
    model                  TEXT NOT NULL,
    prompt_tokens          INTEGER NOT NULL,
    completion_tokens      INTEGER NOT NULL,
    prompt_tokens_estimate INTEGER NOT NULL,
    cache_read_tokens      INTEGER NOT NULL,
    cache_write_tokens     INTEGER NOT NULL,
    estimated              INTEGER NOT NULL,
    note                   TEXT NOT NULL
);
