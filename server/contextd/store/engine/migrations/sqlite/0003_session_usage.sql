-- 0003_session_usage: token usage of a session's model calls, as providers reported it,
-- and contextd's own prompt estimate, summed over every turn.
ALTER TABLE sessions ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN completion_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN prompt_tokens_estimate INTEGER NOT NULL DEFAULT 0;
