-- A batch inserted open gets its sixteen stripes in the same transaction,
-- whoever inserts it (payments::batches::STRIPES says sixteen too; SQLite
-- counts in stripe 0 only, the others stay zero).
-- (One line: the migration runner ends a statement at a line's ';'.)
CREATE TRIGGER transaction_batches_tallies AFTER INSERT ON transaction_batches WHEN new.is_open = 1 BEGIN INSERT INTO batch_tallies (batch_id, stripe, transaction_count, total_amount, entries, modified_ts) SELECT new.id, s.n, 0, 0, 0, new.modified_ts FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) s; END;
