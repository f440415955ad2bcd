-- 0014_memory_scopes_validity: memories below the user (an agent, an app), with the host's
-- metadata, a time of validity and an expiry; facts that were replaced kept as memories of
-- their own, made again from the memory history.
--
-- New columns of memories:
--   agent, app     the scope below the user ('' = none).
--   metadata       the host's labels, a JSON object of strings (memory_metadata holds the
--                  same pairs, for filters).
--   valid_from     when the fact became true (NULL: not known); valid_to when it stopped
--                  (NULL: it still is).
--   expires_at     when contextd forgets the memory (NULL: never); the retention task
--                  deletes it, and reads leave it out from then on.
--   superseded_by  the memory that replaced this one (0: none). A superseded memory is a
--                  fact of the past: its index terms carry its user's "past" key
--                  (store/memory/index.py), so a search of what is true now never reads it.
-- The same text is one memory per user and scope among memories without an end
-- (valid_to NULL): the table's UNIQUE constraint becomes a partial unique index. A table
-- constraint cannot be dropped, so the table is made again as 0007_tenants did, keeping
-- every id (the search index's rowids), every vector and the AUTOINCREMENT high-water mark.
CREATE TABLE memories_new (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id         TEXT NOT NULL DEFAULT 'default',
    user_id           TEXT NOT NULL,
    content           TEXT NOT NULL,
    content_hash      TEXT NOT NULL,
    source_session_id TEXT NOT NULL DEFAULT '',
    source_message_id INTEGER NOT NULL DEFAULT 0,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    embedding         BLOB,
    embedding_model   TEXT NOT NULL DEFAULT '',
    embedding_dims    INTEGER NOT NULL DEFAULT 0,
    embedded_at       REAL NOT NULL DEFAULT 0,
    agent             TEXT NOT NULL DEFAULT '',
    app               TEXT NOT NULL DEFAULT '',
    metadata          TEXT NOT NULL DEFAULT '{}',
    valid_from        REAL,
    valid_to          REAL,
    expires_at        REAL,
    superseded_by     INTEGER NOT NULL DEFAULT 0
);

INSERT INTO memories_new (id, tenant_id, user_id, content, content_hash, source_session_id,
                          source_message_id, created_at, updated_at, embedding,
                          embedding_model, embedding_dims, embedded_at, valid_from)
SELECT id, tenant_id, user_id, content, content_hash, source_session_id, source_message_id,
       created_at, updated_at, embedding, embedding_model, embedding_dims, embedded_at,
       created_at
FROM memories;

DELETE FROM sqlite_sequence WHERE name = 'memories_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'memories_new', seq FROM sqlite_sequence WHERE name = 'memories';

DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;

-- As before (0007, 0013), dropped with the old table.
CREATE INDEX memories_tenant_user_created
    ON memories (tenant_id, user_id, created_at DESC, id DESC);
CREATE INDEX memories_embedding_model ON memories (embedding_model, id);
CREATE INDEX memories_user_vectors ON memories (tenant_id, user_id, embedding_model, embedded_at);
CREATE TRIGGER memories_after_delete_history AFTER DELETE ON memories
BEGIN
    DELETE FROM memory_history WHERE memory_id = OLD.id;
END;

-- One memory per text, user and scope among those without an end: what AddMemory's
-- ON CONFLICT names.
CREATE UNIQUE INDEX memories_current_text
    ON memories (tenant_id, user_id, agent, app, content_hash) WHERE valid_to IS NULL;
-- A listing of one app's (and agent's) memories, newest first.
CREATE INDEX memories_tenant_user_scope
    ON memories (tenant_id, user_id, app, agent, created_at DESC, id DESC);
-- A memory's superseded versions, deleted with it.
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by <> 0;
-- The retention task's pass over expired memories.
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;

-- The memories' metadata pairs, for filters on them (the memory's metadata column is what
-- reads return).
CREATE TABLE memory_metadata (
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (memory_id, key)
);
CREATE INDEX memory_metadata_pair ON memory_metadata (tenant_id, user_id, key, value, memory_id);

-- Facts replaced in place after a turn: each 'update' history row says the memory held
-- old_content until changed_at. Each becomes a superseded memory, true from the memory's
-- previous change (or its creation) to that change, its source that of the history row
-- before it. content_hash '' and the index rebuild below: Python makes both.
WITH versions AS (
    SELECT h.tenant_id, h.user_id, h.memory_id, h.old_content, h.changed_at,
           COALESCE((SELECT p.changed_at FROM memory_history p
                     WHERE p.memory_id = h.memory_id AND p.action = 'update' AND p.id < h.id
                     ORDER BY p.id DESC LIMIT 1), m.created_at) AS since,
           COALESCE((SELECT p.source_session_id FROM memory_history p
                     WHERE p.memory_id = h.memory_id AND p.id < h.id
                     ORDER BY p.id DESC LIMIT 1), '') AS session_id,
           COALESCE((SELECT p.source_message_id FROM memory_history p
                     WHERE p.memory_id = h.memory_id AND p.id < h.id
                     ORDER BY p.id DESC LIMIT 1), 0) AS message_id
    FROM memory_history h JOIN memories m ON m.id = h.memory_id
    WHERE h.action = 'update'
    ORDER BY h.id
)
INSERT INTO memories (tenant_id, user_id, content, content_hash, source_session_id,
                      source_message_id, created_at, updated_at, valid_from, valid_to,
                      superseded_by)
SELECT tenant_id, user_id, old_content, '', session_id, message_id, since, since, since,
       changed_at, memory_id
FROM versions;

-- The history row names the memory that now keeps its old text.
UPDATE memory_history
SET replaced_memory_id = (
    SELECT v.id FROM memories v
    WHERE v.superseded_by = memory_history.memory_id AND v.valid_to = memory_history.changed_at
      AND v.content = memory_history.old_content
    ORDER BY v.id LIMIT 1)
WHERE action = 'update';

-- A memory whose text was replaced is true since its last change.
UPDATE memories
SET valid_from = (SELECT MAX(h.changed_at) FROM memory_history h
                  WHERE h.memory_id = memories.id AND h.action = 'update')
WHERE superseded_by = 0
  AND id IN (SELECT memory_id FROM memory_history WHERE action = 'update');

-- Facts merged into a memory that already said the new text were deleted: each 'merge'
-- row kept the text, so the memory comes back under its own id, superseded by the one it
-- was merged into, true until the merge (since when is not known).
INSERT INTO memories (id, tenant_id, user_id, content, content_hash, created_at, updated_at,
                      valid_from, valid_to, superseded_by)
SELECT h.replaced_memory_id, h.tenant_id, h.user_id, h.old_content, '', h.changed_at,
       h.changed_at, NULL, h.changed_at, h.memory_id
FROM memory_history h
WHERE h.action = 'merge' AND h.replaced_memory_id > 0
  AND NOT EXISTS (SELECT 1 FROM memories x WHERE x.id = h.replaced_memory_id)
  AND h.id = (SELECT MIN(o.id) FROM memory_history o
              WHERE o.action = 'merge' AND o.replaced_memory_id = h.replaced_memory_id);

-- Memories made here have no hash or index terms yet: MemoryRepo rebuilds the index (and
-- fills the hashes) before its first search when the terms version differs.
UPDATE memories_fts_state SET terms_version = 0
WHERE EXISTS (SELECT 1 FROM memories WHERE content_hash = '');
