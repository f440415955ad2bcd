-- 0005_session_summary_by_host: a session summary the host set (SetSessionSummary) is
-- kept; the automatic one written after each chat turn replaces only automatic ones.
-- Rows written before this version count as automatic: which ones a host set is unknown.

ALTER TABLE session_summaries
    ADD COLUMN set_by_host INTEGER NOT NULL DEFAULT 0 CHECK (set_by_host IN (0, 1));
