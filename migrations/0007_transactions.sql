-- Transactions and their settlement batches. Amounts are cents (BIGINT).
-- A transaction is written as `pending` before the processor is called
-- and completed after; `pending_node` names the serving process, so a
-- restart (or another node) can reconcile what a crash left behind.
CREATE TABLE transaction_batches (
    id TEXT PRIMARY KEY,
    batch_num BIGINT NOT NULL,
    product_transaction_id TEXT NOT NULL REFERENCES product_transactions(id),
    location_id TEXT NOT NULL REFERENCES locations(id),
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL,
    processing_status_id BIGINT NOT NULL,
    is_open BIGINT NOT NULL,
    batch_close_ts BIGINT,
    settlement_file_name TEXT,
    status_message TEXT,
    transaction_count BIGINT NOT NULL,
    total_amount BIGINT NOT NULL,
    settle_attempts BIGINT NOT NULL,
    entries BIGINT NOT NULL,
    created_user_id TEXT,
    modified_user_id TEXT
);
CREATE UNIQUE INDEX transaction_batches_num ON transaction_batches (product_transaction_id, batch_num);
-- At most one open batch per product transaction.
CREATE UNIQUE INDEX transaction_batches_open ON transaction_batches (product_transaction_id) WHERE is_open = 1;
CREATE INDEX transaction_batches_location ON transaction_batches (location_id, created_ts, id);

CREATE TABLE transactions (
    id TEXT PRIMARY KEY,
    payment_method TEXT NOT NULL,
    account_vault_id TEXT,
    recurring_id TEXT,
    first_six TEXT,
    last_four TEXT,
    account_holder_name TEXT,
    transaction_amount BIGINT,
    description TEXT,
    transaction_code TEXT,
    avs TEXT,
    avs_enhanced TEXT,
    batch TEXT,
    item TEXT,
    order_num TEXT,
    timestamp TEXT,
    verbiage TEXT,
    transaction_settlement_status TEXT,
    effective_date TEXT,
    routing TEXT,
    return_date TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL,
    transaction_api_id TEXT,
    terms_agree BIGINT,
    notification_email_address TEXT,
    notification_email_sent BIGINT,
    response_message TEXT,
    auth_amount BIGINT,
    auth_code TEXT,
    status_id BIGINT,
    type_id BIGINT NOT NULL,
    reason_code_id BIGINT,
    location_id TEXT NOT NULL REFERENCES locations(id),
    contact_id TEXT,
    product_transaction_id TEXT NOT NULL REFERENCES product_transactions(id),
    billing_zip TEXT,
    billing_street TEXT,
    billing_phone TEXT,
    billing_city TEXT,
    billing_state TEXT,
    tax BIGINT,
    tip_amount BIGINT,
    customer_ip TEXT,
    customer_id TEXT,
    po_number TEXT,
    cvv_response TEXT,
    clerk_number TEXT,
    created_user_id TEXT,
    modified_user_id TEXT,
    ach_identifier TEXT,
    check_number TEXT,
    settle_date TEXT,
    charge_back_date TEXT,
    void_date TEXT,
    account_type TEXT,
    is_recurring BIGINT,
    is_accountvault BIGINT,
    transaction_c1 TEXT,
    transaction_c2 TEXT,
    transaction_c3 TEXT,
    additional_amounts TEXT,
    terminal_serial_number TEXT,
    entry_mode_id TEXT,
    terminal_id TEXT,
    quick_invoice_id TEXT,
    ach_sec_code TEXT,
    custom_data TEXT,
    hosted_payment_page_id TEXT,
    trx_source_id BIGINT NOT NULL,
    transaction_batch_id TEXT REFERENCES transaction_batches(id),
    recurring_flag TEXT,
    recurring_number BIGINT,
    checkin_date TEXT,
    checkout_date TEXT,
    room_num TEXT,
    room_rate BIGINT,
    advance_deposit BIGINT,
    no_show BIGINT,
    folio_num TEXT,
    emv_receipt_data TEXT,
    previous_transaction_id TEXT,
    subtotal_amount BIGINT,
    surcharge_amount BIGINT,
    card_present BIGINT,
    account_number TEXT,
    exp_date TEXT,
    state TEXT NOT NULL,
    pending_node TEXT,
    pending_action TEXT,
    processor_reference TEXT,
    refunded_amount BIGINT NOT NULL,
    batch_seq BIGINT
);
CREATE INDEX transactions_location ON transactions (location_id, id);
CREATE UNIQUE INDEX transactions_api_id ON transactions (location_id, transaction_api_id);
CREATE INDEX transactions_batch ON transactions (transaction_batch_id, batch_seq);
CREATE INDEX transactions_previous ON transactions (previous_transaction_id);
-- Only unfinished work is indexed: what the reconciler looks for.
CREATE INDEX transactions_unfinished ON transactions (pending_node)
    WHERE state = 'pending' OR pending_action IS NOT NULL;
-- Velocity limits sum a product transaction's items of a day or month.
CREATE INDEX transactions_velocity ON transactions (product_transaction_id, type_id, created_ts);

-- Responses replayed for a repeated Idempotency-Key (24 hours). The key is
-- per user; `request_hash` refuses the same key with another body.
CREATE TABLE idempotency_keys (
    user_id TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status BIGINT,
    response TEXT,
    transaction_id TEXT,
    created_ts BIGINT NOT NULL,
    PRIMARY KEY (user_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ts);

-- Level 3 data: one row per transaction, replaced whole on every POST.
CREATE TABLE transaction_level3s (
    id TEXT PRIMARY KEY,
    transaction_id TEXT NOT NULL REFERENCES transactions(id),
    location_id TEXT NOT NULL REFERENCES locations(id),
    level3_data TEXT NOT NULL,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE UNIQUE INDEX transaction_level3s_transaction ON transaction_level3s (transaction_id);

-- Clerks run transactions but cannot settle batches.
INSERT INTO roles (id, title, is_admin) VALUES ('3', 'Clerk', 0);
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactions.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactions.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactions.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactionbatches.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactionbatches.settle');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactionlevel3s.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactionlevel3s.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'transactionlevel3s.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'transactions.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'transactionbatches.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'transactionlevel3s.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactions.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactions.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactions.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactionbatches.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactionlevel3s.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'transactionlevel3s.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'contacts.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'accountvaults.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'accountvaults.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'locationinfos.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'producttransactions.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('3', 'bins.read');
