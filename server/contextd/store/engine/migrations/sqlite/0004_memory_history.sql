-- 0004_memory_history: where each memory written after a chat turn came from, and how it
-- changed (the atomic-memory writes of contextd.app.after_turn).
--
-- memory_id is the memory as it is now. Rows:
--   add    a memory extracted from a turn: new_content is its text, old_content ''.
--   update the memory's text was replaced in place (same id); old_content is what it said.
--   merge  the replacement text already was another memory (memory_id): the replaced one,
--          replaced_memory_id, was deleted; old_content is what it said.
-- method: 'rule-fallback' (patterns, no model) or 'llm:<model>'. Like memories, history rows
-- name their source session and message without foreign keys (provenance only).
-- Memories added by hosts (AddMemory, Collect) have no 'add' row.

CREATE TABLE memory_history (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id          INTEGER NOT NULL,
    user_id            TEXT NOT NULL,
    action             TEXT NOT NULL CHECK (action IN ('add', 'update', 'merge')),
    old_content        TEXT NOT NULL DEFAULT '',
    new_content        TEXT NOT NULL,
    replaced_memory_id INTEGER NOT NULL DEFAULT 0,
    method             TEXT NOT NULL,
    source_session_id  TEXT NOT NULL DEFAULT '',
    source_message_id  INTEGER NOT NULL DEFAULT 0,
    changed_at         REAL NOT NULL
);

CREATE INDEX memory_history_memory ON memory_history (memory_id, id);
CREATE INDEX memory_history_user ON memory_history (user_id, id);

-- Deleting a memory forgets its history too: what a user deletes does not linger in old
-- versions.
CREATE TRIGGER memories_after_delete_history AFTER DELETE ON memories
BEGIN
    DELETE FROM memory_history WHERE memory_id = OLD.id;
END;
