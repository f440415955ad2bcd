-- 0013_memory_vectors: each memory's vector for search by meaning, kept with the memory.
-- embedding: float32 values, little-endian; embedding_model: the model that made it ('' for
-- none yet: a new memory, or one whose text changed); embedding_dims: how many values;
-- embedded_at: when it was stored. A memory whose embedding_model is not the server's
-- model counts as not embedded (its vector is made again in the background).
ALTER TABLE memories ADD COLUMN embedding BLOB;
ALTER TABLE memories ADD COLUMN embedding_model TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN embedding_dims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN embedded_at REAL NOT NULL DEFAULT 0;
-- The background worker's scan for memories to embed (another model's, or none yet).
CREATE INDEX memories_embedding_model ON memories (embedding_model, id);
-- A user's vectors of one model: a search's check that they did not change (their
-- latest embedded_at) is one lookup in this index.
CREATE INDEX memories_user_vectors ON memories (tenant_id, user_id, embedding_model, embedded_at);
