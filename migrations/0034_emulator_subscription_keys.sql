-- Duplicate subscriptions (the Authorize.Net emulator's E00012, ADR
-- 0016): a new ARB subscription takes the key of what makes two the same
-- (a digest of location, card, customer id, bill-to, amount, invoice
-- number and schedule) in the write job that creates it. The key stays
-- taken while its subscription runs; a later one may take it over only
-- once that subscription has ended, so identical requests sent at once
-- create one subscription.
CREATE TABLE emulator_subscription_keys (
    guard_key TEXT PRIMARY KEY,
    recurring_id TEXT NOT NULL
);
CREATE INDEX emulator_subscription_keys_recurring ON emulator_subscription_keys (recurring_id);
