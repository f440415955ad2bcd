-- 0004_event_logs_follow_sessions: a session's event log goes with the session, in the
-- transaction that deletes it. The files of SQLite's set-up are removed after the commit
-- (store/event_log/removals.py), and a process that died in between left them for its next
-- start; in the database nothing is left for any replica to find.

DELETE FROM event_lines WHERE session_id NOT IN (SELECT id FROM sessions);
DELETE FROM event_log_ends WHERE session_id NOT IN (SELECT id FROM sessions);

CREATE INDEX event_lines_session ON event_lines (session_id);
CREATE INDEX event_log_ends_session ON event_log_ends (session_id);

ALTER TABLE event_lines ADD CONSTRAINT event_lines_session_fk
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE event_log_ends ADD CONSTRAINT event_log_ends_session_fk
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
