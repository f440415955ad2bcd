-- 0011_cache_versions: SQLite's 0016. Replicas keep reads in memory and check them
-- against these versions, which every write of what they cover moves on in its own
-- transaction: a session's version covers its messages and compression summaries, the
-- catalog's the prompt templates and skills of every tenant.
ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

CREATE TABLE cache_versions (
    name    TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
INSERT INTO cache_versions (name, version) VALUES ('catalog', 0);
