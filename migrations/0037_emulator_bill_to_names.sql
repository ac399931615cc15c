-- The bill-to first and last names an Authorize.Net client sent with a
-- payment (ADR 0016). Our row keeps one holder name, which cannot be
-- split back into the two ("Ellen" and "Van Dyke" are not "Ellen Van"
-- and "Dyke"); getTransactionDetails and the transaction lists show them
-- as sent. NULL for payments recorded before, or sent without names.
ALTER TABLE emulator_transactions ADD COLUMN first_name TEXT;
ALTER TABLE emulator_transactions ADD COLUMN last_name TEXT;
