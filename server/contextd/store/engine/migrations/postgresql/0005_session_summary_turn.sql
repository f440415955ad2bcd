-- 0005_session_summary_turn: SQLite's 0010 (read it for why).
ALTER TABLE session_summaries ADD COLUMN turn_index BIGINT NOT NULL DEFAULT 0;
