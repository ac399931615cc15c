-- Failed sign-ins are counted per username exactly as typed (kept only
-- as a digest), whether or not a user has that name, so that the lock they
-- lead to does not tell which names exist (ADR 0012). A row matters until
-- forget_ts (the name's clock: its user's location time, else wall time)
-- and is deleted after prune_after (wall time) by the sessions sweep.
CREATE TABLE sign_in_failures (
    name_digest TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    locked_until BIGINT,
    forget_ts BIGINT NOT NULL,
    prune_after BIGINT NOT NULL
);
CREATE INDEX sign_in_failures_prune ON sign_in_failures (prune_after);
-- Expired sessions are swept (see sessions::sweep).
CREATE INDEX user_sessions_expires ON user_sessions (expires_ts);
-- Locks were kept on users; they start again from the new table.
UPDATE users SET login_locked_until = NULL WHERE login_locked_until IS NOT NULL;
