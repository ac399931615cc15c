-- An unfiltered list's total without counting its rows (ADR 0022): every
-- insert, delete or move of a counted row moves its location's count in
-- the same write, so `row_counts` is exact for every reader. The counted
-- tables are `engine::query::COUNTED`. One writer: one stripe.
CREATE TABLE row_counts (
    table_name TEXT NOT NULL,
    location_id TEXT NOT NULL,
    stripe INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (table_name, location_id, stripe)
) WITHOUT ROWID;
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'contacts', location_id, 0, COUNT(*) FROM contacts GROUP BY location_id;
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'transactions', location_id, 0, COUNT(*) FROM transactions GROUP BY location_id;
INSERT INTO row_counts (table_name, location_id, stripe, n) SELECT 'account_vaults', location_id, 0, COUNT(*) FROM account_vaults GROUP BY location_id;
CREATE TRIGGER contacts_counted_insert AFTER INSERT ON contacts BEGIN INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('contacts', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
CREATE TRIGGER contacts_counted_delete AFTER DELETE ON contacts BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'contacts' AND location_id = old.location_id AND stripe = 0; END;
CREATE TRIGGER contacts_counted_move AFTER UPDATE OF location_id ON contacts WHEN old.location_id IS NOT new.location_id BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'contacts' AND location_id = old.location_id AND stripe = 0; INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('contacts', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
CREATE TRIGGER transactions_counted_insert AFTER INSERT ON transactions BEGIN INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('transactions', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
CREATE TRIGGER transactions_counted_delete AFTER DELETE ON transactions BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'transactions' AND location_id = old.location_id AND stripe = 0; END;
CREATE TRIGGER transactions_counted_move AFTER UPDATE OF location_id ON transactions WHEN old.location_id IS NOT new.location_id BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'transactions' AND location_id = old.location_id AND stripe = 0; INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('transactions', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
CREATE TRIGGER account_vaults_counted_insert AFTER INSERT ON account_vaults BEGIN INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('account_vaults', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
CREATE TRIGGER account_vaults_counted_delete AFTER DELETE ON account_vaults BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'account_vaults' AND location_id = old.location_id AND stripe = 0; END;
CREATE TRIGGER account_vaults_counted_move AFTER UPDATE OF location_id ON account_vaults WHEN old.location_id IS NOT new.location_id BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = 'account_vaults' AND location_id = old.location_id AND stripe = 0; INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('account_vaults', new.location_id, 0, 1) ON CONFLICT (table_name, location_id, stripe) DO UPDATE SET n = n + 1; END;
