-- 0007_tenants: every user belongs to a tenant, and so does every row a user owns. A user
-- is (tenant_id, user_id): "bob" of two tenants are two users. Rows written before this
-- version land in the 'default' tenant, the one of `--auth none` and of keys made
-- without --tenant. Messages, compression summaries and token counts hang off their
-- session and are reached only through it; conversation rows also carry the tenant so that
-- a message looked up by id is found only in its own tenant.

ALTER TABLE sessions ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX sessions_user_updated;
CREATE INDEX sessions_tenant_user_updated
    ON sessions (tenant_id, user_id, updated_at DESC, id DESC);

ALTER TABLE conversation ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';

ALTER TABLE session_summaries ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX session_summaries_user_updated;
CREATE INDEX session_summaries_tenant_user_updated
    ON session_summaries (tenant_id, user_id, updated_at DESC);

ALTER TABLE memory_history ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX memory_history_user;
CREATE INDEX memory_history_tenant_user ON memory_history (tenant_id, user_id, id);

-- memories' UNIQUE (user_id, content_hash) is a table constraint: the table is made again
-- with UNIQUE (tenant_id, user_id, content_hash), keeping every id (memories_fts's rowids
-- are memory ids, and clients keep them) and the AUTOINCREMENT high-water mark, so that an
-- id deleted before the migration is still never reused.
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
    UNIQUE (tenant_id, user_id, content_hash)
);

INSERT INTO memories_new (id, tenant_id, user_id, content, content_hash, source_session_id,
                          source_message_id, created_at, updated_at)
SELECT id, 'default', user_id, content, content_hash, source_session_id, source_message_id,
       created_at, updated_at
FROM memories;

DELETE FROM sqlite_sequence WHERE name = 'memories_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'memories_new', seq FROM sqlite_sequence WHERE name = 'memories';

DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;

-- A user's memories, newest first: MemoryRepo.list_memories pages on the key (created_at, id).
CREATE INDEX memories_tenant_user_created
    ON memories (tenant_id, user_id, created_at DESC, id DESC);

-- Dropped with the old table; as in 0004_memory_history: deleting a memory forgets its
-- history too.
CREATE TRIGGER memories_after_delete_history AFTER DELETE ON memories
BEGIN
    DELETE FROM memory_history WHERE memory_id = OLD.id;
END;

-- Templates and skills per tenant: the 'default' tenant's rows are the server-wide
-- defaults (what existed before); another tenant's row with the same name overrides the
-- default for that tenant only.
CREATE TABLE prompt_templates_new (
    tenant_id     TEXT NOT NULL DEFAULT 'default',
    scenario      TEXT NOT NULL,
    system_prompt TEXT NOT NULL,
    version       INTEGER NOT NULL DEFAULT 1,
    enabled       INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    updated_at    REAL NOT NULL,
    PRIMARY KEY (tenant_id, scenario)
);
INSERT INTO prompt_templates_new (tenant_id, scenario, system_prompt, version, enabled,
                                  updated_at)
SELECT 'default', scenario, system_prompt, version, enabled, updated_at FROM prompt_templates;
DROP TABLE prompt_templates;
ALTER TABLE prompt_templates_new RENAME TO prompt_templates;

CREATE TABLE skills_new (
    tenant_id   TEXT NOT NULL DEFAULT 'default',
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    prompt      TEXT NOT NULL DEFAULT '',
    apps        TEXT NOT NULL DEFAULT '[]',
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    updated_at  REAL NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
INSERT INTO skills_new (tenant_id, name, description, prompt, apps, enabled, updated_at)
SELECT 'default', name, description, prompt, apps, enabled, updated_at FROM skills;
DROP TABLE skills;
ALTER TABLE skills_new RENAME TO skills;
