-- Short credentials for Authorize.Net integrations (ADR 0016): their
-- schema caps a login at 25 characters and a transaction key at 16, which
-- our user ids and API keys exceed. One pair per user, the key hashed.
CREATE TABLE emulator_credentials (
    user_id TEXT PRIMARY KEY REFERENCES users(id),
    login TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL,
    created_ts BIGINT NOT NULL
);
