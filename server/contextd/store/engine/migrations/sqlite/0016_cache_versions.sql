-- 0016_cache_versions: the marks of what a process may keep in memory, as on
-- PostgreSQL, for the workers of one server sharing this file (--workers): a session's
-- version covers its messages and compression summaries, the catalog's the prompt
-- templates and skills of every tenant. Every write of what they cover moves them on in
-- its own transaction, where the file is shared; a server alone on it keeps them as
-- they are.
ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TABLE cache_versions (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
INSERT INTO cache_versions (name, version) VALUES ('catalog', 0);
