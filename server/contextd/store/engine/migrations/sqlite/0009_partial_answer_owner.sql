-- 0009_partial_answer_owner: the process that wrote a partial_answers row (a token of its
-- own per start). One process uses a data directory, so on SQLite every row found at
-- start is still a turn the server's end cut off; the column keeps the table the same as
-- PostgreSQL's, where several processes share the rows (its migration 0003 says how).

ALTER TABLE partial_answers ADD COLUMN owner TEXT NOT NULL DEFAULT '';
