-- 0006_api_keys: API keys for `--auth api-key`. Only a hash of each key's secret is
-- kept; id is the key's public part, the one logs name. Times are Unix seconds;
-- expires_at, revoked_at and last_used_at are NULL until they apply.

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    secret_hash  TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    user_id      TEXT NOT NULL,
    tenant_id    TEXT NOT NULL DEFAULT 'default',
    service      INTEGER NOT NULL DEFAULT 0 CHECK (service IN (0, 1)),
    created_at   REAL NOT NULL,
    expires_at   REAL,
    revoked_at   REAL,
    last_used_at REAL
);
