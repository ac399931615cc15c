-- Recurring schedules and the mail outbox (ADR 0009).
--
-- A schedule's periods are anchor_date + n intervals; `period` is the n of
-- the next run, `run_seq` numbers its charge attempts (the transaction's
-- run key), `due_ts`/`notify_ts` are the epoch seconds, in real time, of
-- the local midnight at which the next run and the next notice fall due.
-- Workers lease rows (PostgreSQL: FOR UPDATE SKIP LOCKED).
CREATE TABLE recurrings (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    account_vault_id TEXT NOT NULL,
    contact_id TEXT,
    product_transaction_id TEXT,
    payment_method TEXT NOT NULL,
    transaction_amount BIGINT NOT NULL,
    interval_count BIGINT NOT NULL,
    interval_type TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT,
    next_run_date TEXT,
    description TEXT,
    notification_days BIGINT NOT NULL,
    installment_total_count BIGINT,
    installment_amount_total BIGINT,
    active BIGINT NOT NULL,
    recurring_type_id TEXT NOT NULL,
    recurring_c1 TEXT,
    recurring_c2 TEXT,
    recurring_c3 TEXT,
    status TEXT NOT NULL,
    skip_count BIGINT NOT NULL,
    defer_count BIGINT NOT NULL,
    retry_count BIGINT NOT NULL,
    payment_count BIGINT NOT NULL,
    last_run_date TEXT,
    last_run_status TEXT,
    last_transaction_id TEXT,
    ended_reason TEXT,
    anchor_date TEXT NOT NULL,
    period BIGINT NOT NULL,
    run_seq BIGINT NOT NULL,
    due_ts BIGINT,
    notify_ts BIGINT,
    notified_date TEXT,
    lease_owner TEXT,
    lease_until_ms BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX recurrings_location ON recurrings (location_id, next_run_date);
CREATE INDEX recurrings_vault ON recurrings (account_vault_id);
CREATE INDEX recurrings_due ON recurrings (due_ts) WHERE status = 'active';
CREATE INDEX recurrings_notify ON recurrings (notify_ts) WHERE status = 'active' AND notify_ts IS NOT NULL;

-- The run a recurring payment belongs to (`<recurring id>:<run_seq>`):
-- unique, so a schedule can never charge twice for one attempt, whatever
-- a crash or a lost lease does.
ALTER TABLE transactions ADD COLUMN recurring_run TEXT;
CREATE UNIQUE INDEX transactions_recurring_run ON transactions (recurring_run) WHERE recurring_run IS NOT NULL;

-- Outgoing mail, written in the same transaction as the change it tells
-- of; delivered by SMTP when configured (leases like postbacks), else kept
-- for /dev/mail.
CREATE TABLE mail_outbox (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    recipient TEXT NOT NULL,
    reply_to TEXT,
    from_name TEXT NOT NULL,
    subject TEXT NOT NULL,
    text_body TEXT NOT NULL,
    html_body TEXT NOT NULL,
    resource TEXT,
    resource_id TEXT,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    due_ms BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until_ms BIGINT,
    last_error TEXT,
    sent_ts BIGINT,
    created_ts BIGINT NOT NULL
);
CREATE INDEX mail_outbox_pending ON mail_outbox (due_ms) WHERE status = 'pending';
CREATE INDEX mail_outbox_location ON mail_outbox (location_id, created_ts);
CREATE INDEX mail_outbox_resource ON mail_outbox (resource_id);

INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'recurrings.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'recurrings.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'recurrings.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'recurrings.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'recurrings.read');
