-- Users who sign in with a password for a session token (POST /v2/token).
-- Passwords are argon2id hashes (PHC strings); session tokens are kept as
-- SHA-256 digests, never in clear.
ALTER TABLE users ADD COLUMN password_hash TEXT;
ALTER TABLE users ADD COLUMN requires_new_password BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN login_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN login_locked_until BIGINT;
ALTER TABLE users ADD COLUMN last_login_ts BIGINT;
CREATE TABLE user_sessions (
    token_hash TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id),
    created_ts BIGINT NOT NULL,
    expires_ts BIGINT NOT NULL
);
CREATE INDEX user_sessions_user ON user_sessions (user_id);
