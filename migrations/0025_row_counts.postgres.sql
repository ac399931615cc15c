-- An unfiltered list's total without counting its rows (ADR 0022): every
-- insert, delete or move of a counted row moves its location's count in
-- the same transaction, so `row_counts` is exact for every snapshot. The
-- counted tables are `engine::query::COUNTED`. A location's count is
-- spread over sixteen stripes, one per backend (its pid modulo 16), so
-- that concurrent writers to one location rarely wait on one row; a
-- reader sums the stripes.
CREATE TABLE row_counts (
    table_name TEXT NOT NULL,
    location_id TEXT NOT NULL,
    stripe INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (table_name, location_id, stripe)
);
-- (One line: the migration runner ends a statement at a line's ';'.)
CREATE OR REPLACE FUNCTION ferrogate_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP <> 'INSERT' THEN INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES (TG_TABLE_NAME, OLD.location_id, pg_backend_pid() % 16, -1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = row_counts.n - 1; END IF; IF TG_OP <> 'DELETE' THEN INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES (TG_TABLE_NAME, NEW.location_id, pg_backend_pid() % 16, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = row_counts.n + 1; END IF; RETURN NULL; END $$;
CREATE TRIGGER contacts_counted AFTER INSERT OR DELETE ON contacts FOR EACH ROW EXECUTE FUNCTION ferrogate_count_rows();
CREATE TRIGGER contacts_counted_move AFTER UPDATE OF location_id ON contacts FOR EACH ROW WHEN (OLD.location_id IS DISTINCT FROM NEW.location_id) EXECUTE FUNCTION ferrogate_count_rows();
CREATE TRIGGER transactions_counted AFTER INSERT OR DELETE ON transactions FOR EACH ROW EXECUTE FUNCTION ferrogate_count_rows();
CREATE TRIGGER transactions_counted_move AFTER UPDATE OF location_id ON transactions FOR EACH ROW WHEN (OLD.location_id IS DISTINCT FROM NEW.location_id) EXECUTE FUNCTION ferrogate_count_rows();
CREATE TRIGGER account_vaults_counted AFTER INSERT OR DELETE ON account_vaults FOR EACH ROW EXECUTE FUNCTION ferrogate_count_rows();
CREATE TRIGGER account_vaults_counted_move AFTER UPDATE OF location_id ON account_vaults FOR EACH ROW WHEN (OLD.location_id IS DISTINCT FROM NEW.location_id) EXECUTE FUNCTION ferrogate_count_rows();
-- Filled after the triggers exist: creating a trigger locks its table
-- against writes until this migration commits, so a row another node
-- writes meanwhile is either seen here or counted by its trigger, never
-- neither.
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'contacts', location_id, 0, COUNT(*) FROM contacts GROUP BY location_id;
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'transactions', location_id, 0, COUNT(*) FROM transactions GROUP BY location_id;
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'account_vaults', location_id, 0, COUNT(*) FROM account_vaults GROUP BY location_id;
