-- 0008_memory_vectors: SQLite's 0013 (read it for why).
ALTER TABLE memories ADD COLUMN embedding BYTEA;
ALTER TABLE memories ADD COLUMN embedding_model TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN embedding_dims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN embedded_at DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE INDEX memories_embedding_model ON memories (embedding_model, id);
CREATE INDEX memories_user_vectors
    ON memories (tenant_id, user_id, embedding_model, embedded_at);
