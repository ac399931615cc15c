-- Duplicate guards (the Authorize.Net emulator's reason 11, ADR 0016): a
-- new payment takes its key in the write job that stores it as pending,
-- so of identical requests sent at once only one is charged. The key is
-- a digest of what makes two requests the same; a key is free again once
-- its window has passed (the next taker overwrites it).
CREATE TABLE duplicate_guards (
    guard_key TEXT PRIMARY KEY,
    transaction_id TEXT NOT NULL,
    taken_ts BIGINT NOT NULL
);
