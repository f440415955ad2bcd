-- 0010_server_secrets: SQLite's 0015 (read it for why).
CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
