-- A transaction's place in its batch (`batch_seq`) comes from this
-- sequence on PostgreSQL (ADR 0021), not from the batch row's `entries`:
-- a sale then takes the batch row's lock only for its last statement and
-- the commit. Numbers grow across batches; within a batch they keep the
-- order of entry. It starts above every place already given.
CREATE SEQUENCE transaction_batch_seq;
SELECT setval('transaction_batch_seq', COALESCE((SELECT MAX(batch_seq) FROM transactions), 0) + 1);
