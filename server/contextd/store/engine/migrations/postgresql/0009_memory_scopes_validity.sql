-- 0009_memory_scopes_validity: SQLite's 0014 (read it for why); here the columns are added
-- and the UNIQUE constraint dropped in place.
ALTER TABLE memories ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN app TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE memories ADD COLUMN valid_from DOUBLE PRECISION;
ALTER TABLE memories ADD COLUMN valid_to DOUBLE PRECISION;
ALTER TABLE memories ADD COLUMN expires_at DOUBLE PRECISION;
ALTER TABLE memories ADD COLUMN superseded_by BIGINT NOT NULL DEFAULT 0;
UPDATE memories SET valid_from = created_at;
ALTER TABLE memories DROP CONSTRAINT memories_tenant_id_user_id_content_hash_key;

CREATE UNIQUE INDEX memories_current_text
    ON memories (tenant_id, user_id, agent, app, content_hash) WHERE valid_to IS NULL;
CREATE INDEX memories_tenant_user_scope
    ON memories (tenant_id, user_id, app, agent, created_at DESC, id DESC);
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by <> 0;
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE memory_metadata (
    memory_id BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (memory_id, key)
);
CREATE INDEX memory_metadata_pair ON memory_metadata (tenant_id, user_id, key, value, memory_id);

WITH versions AS (
    SELECT h.id AS history_id, h.tenant_id, h.user_id, h.memory_id, h.old_content,
           h.changed_at,
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
)
INSERT INTO memories (tenant_id, user_id, content, content_hash, source_session_id,
                      source_message_id, created_at, updated_at, valid_from, valid_to,
                      superseded_by)
SELECT tenant_id, user_id, old_content, '', session_id, message_id, since, since, since,
       changed_at, memory_id
FROM versions
ORDER BY history_id;

UPDATE memory_history
SET replaced_memory_id = (
    SELECT v.id FROM memories v
    WHERE v.superseded_by = memory_history.memory_id AND v.valid_to = memory_history.changed_at
      AND v.content = memory_history.old_content
    ORDER BY v.id LIMIT 1)
WHERE action = 'update';

UPDATE memories
SET valid_from = (SELECT MAX(h.changed_at) FROM memory_history h
                  WHERE h.memory_id = memories.id AND h.action = 'update')
WHERE superseded_by = 0
  AND id IN (SELECT memory_id FROM memory_history WHERE action = 'update');

INSERT INTO memories (id, tenant_id, user_id, content, content_hash, created_at, updated_at,
                      valid_from, valid_to, superseded_by)
SELECT h.replaced_memory_id, h.tenant_id, h.user_id, h.old_content, '', h.changed_at,
       h.changed_at, NULL, h.changed_at, h.memory_id
FROM memory_history h
WHERE h.action = 'merge' AND h.replaced_memory_id > 0
  AND NOT EXISTS (SELECT 1 FROM memories x WHERE x.id = h.replaced_memory_id)
  AND h.id = (SELECT MIN(o.id) FROM memory_history o
              WHERE o.action = 'merge' AND o.replaced_memory_id = h.replaced_memory_id);

UPDATE memories_fts_state SET terms_version = 0
WHERE EXISTS (SELECT 1 FROM memories WHERE content_hash = '');
