-- 0011_usage_detail: the prompt-cache figures providers report, and whether a figure was
-- counted by contextd instead (a provider that reports no usage, a call cut off before
-- its usage came). The cache figures are part of prompt_tokens, which counts every input
-- token. A session counts its turns whose usage includes such estimates; a running turn's
-- row says whether its usage so far does.
ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN estimated_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE partial_answers ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
