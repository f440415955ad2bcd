-- 0003_partial_answer_owner: SQLite's 0009. Here a running turn's partial_answers row is
-- a lease on its session, held by one process. ``owner`` is that process's token; the
-- process renews ``updated_at`` about once a second while the turn runs. A row of another
-- owner whose ``updated_at`` is older than the lease time is a turn a dead replica left:
-- the next turn of the session closes it as interrupted. A row with ``turn_index`` 0 is a
-- claim taken before the turn was numbered: it holds no turn.

ALTER TABLE partial_answers ADD COLUMN owner TEXT NOT NULL DEFAULT '';
