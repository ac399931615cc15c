-- The places of transactions in their batches (batch_seq) on PostgreSQL
-- (ADR 0025): one sequence, so concurrent sales counting in different
-- stripes are still numbered in the order they entered, and wait for
-- nothing to get a number. It starts above every number already given.
CREATE SEQUENCE batch_entries;
SELECT setval('batch_entries', GREATEST(1, (SELECT COALESCE(MAX(batch_seq), 0) FROM transactions)));

-- A batch inserted open gets its sixteen stripes in the same transaction,
-- whoever inserts it (payments::batches::STRIPES says sixteen too).
-- (One line: the migration runner ends a statement at a line's ';'.)
CREATE OR REPLACE FUNCTION ferrogate_open_tallies() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO batch_tallies (batch_id, stripe, transaction_count, total_amount, entries, modified_ts) SELECT NEW.id, s, 0, 0, 0, NEW.modified_ts FROM generate_series(0, 15) s; RETURN NULL; END $$;
CREATE TRIGGER transaction_batches_tallies AFTER INSERT ON transaction_batches FOR EACH ROW WHEN (NEW.is_open = 1) EXECUTE FUNCTION ferrogate_open_tallies();
