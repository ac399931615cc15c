-- The places of transactions in their batches (batch_seq) on PostgreSQL
-- (ADR 0025): one sequence, so concurrent sales counting in different
-- stripes are still numbered in the order they entered, and wait for
-- nothing to get a number. It starts above every number already given.
CREATE SEQUENCE batch_entries;
SELECT setval('batch_entries', GREATEST(1, (SELECT COALESCE(MAX(batch_seq), 0) FROM transactions)));
