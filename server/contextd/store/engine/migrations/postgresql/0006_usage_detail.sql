-- 0006_usage_detail: SQLite's 0011 (read it for what the columns mean).
ALTER TABLE sessions ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN estimated_turns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
