-- 0010_session_summary_turn: the turn an automatic session summary was made after. Work
-- after turns may finish out of turn order (on several replicas sharing a database), and
-- a summary made after an earlier turn must not replace one made after a later turn.
ALTER TABLE session_summaries ADD COLUMN turn_index INTEGER NOT NULL DEFAULT 0;
