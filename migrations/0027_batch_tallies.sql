-- The open batch's tallies (ADR 0025). Every sale of a product
-- transaction used to update its open batch's row, and a row lock lasts
-- until the commit, so the sales of one product transaction completed
-- one commit at a time. A sale now counts itself in one of sixteen
-- stripes of the open batch (picked by its id); sales in different
-- stripes never wait for each other. Starting to settle folds the
-- stripes into the batch's row and deletes them, so only open batches
-- have tallies, and a sale that counts after that finds no stripe and
-- goes to the next batch.
CREATE TABLE batch_tallies (
    batch_id TEXT NOT NULL REFERENCES transaction_batches(id),
    stripe BIGINT NOT NULL,
    transaction_count BIGINT NOT NULL,
    total_amount BIGINT NOT NULL,
    -- Entries ever made in this stripe. SQLite counts in stripe 0 only
    -- (its jobs never overlap), and this numbers its transactions
    -- (batch_seq); PostgreSQL numbers them from the batch_entries
    -- sequence.
    entries BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL,
    PRIMARY KEY (batch_id, stripe)
);

-- The batches open now get their stripes. Their entries start at the
-- row's, so the numbers already given stay below the new ones.
INSERT INTO batch_tallies (batch_id, stripe, transaction_count, total_amount, entries, modified_ts)
SELECT b.id, s.n, 0, 0, b.entries, b.modified_ts FROM transaction_batches b CROSS JOIN (
    SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
    UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
    UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11
    UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15
) s WHERE b.is_open = 1;

-- What reads of batches see: the row plus its tallies. Same columns as
-- the table, so the generic engine reads it as it reads the table: a
-- column added to transaction_batches must be added here too (the
-- engine reads batches only through this view).
CREATE VIEW transaction_batches_read AS
SELECT
    b.id,
    b.batch_num,
    b.product_transaction_id,
    b.location_id,
    b.created_ts,
    COALESCE((SELECT MAX(k.modified_ts) FROM batch_tallies k WHERE k.batch_id = b.id AND k.modified_ts > b.modified_ts), b.modified_ts) AS modified_ts,
    b.processing_status_id,
    b.is_open,
    b.batch_close_ts,
    b.settlement_file_name,
    b.status_message,
    b.transaction_count + COALESCE((SELECT CAST(SUM(k.transaction_count) AS BIGINT) FROM batch_tallies k WHERE k.batch_id = b.id), 0) AS transaction_count,
    b.total_amount + COALESCE((SELECT CAST(SUM(k.total_amount) AS BIGINT) FROM batch_tallies k WHERE k.batch_id = b.id), 0) AS total_amount,
    b.settle_attempts,
    b.entries,
    b.created_user_id,
    b.modified_user_id
FROM transaction_batches b;
