-- 0015_server_secrets: secrets of the deployment, made once by the first server to
-- need one and read by every replica sharing the database. ``ids`` is the key of the
-- message and memory ids callers see (core/ids.py), 32 random bytes as hex: the store
-- numbers rows as before, and the same key makes the same ids on every replica and
-- after every restart. Copied with the rest (contextd store copy), so that ids stay.

CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at REAL NOT NULL
);
