-- Quick invoices (ADR 0017): an invoice emailed with a link to pay it.
-- `pay_token` is the unguessable part of the pay page's address;
-- `remind_ts` the location-time second of the next reminder (NULL when
-- none is due), which the scheduler claims like a recurring's notice.
CREATE TABLE quick_invoices (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    contact_id TEXT REFERENCES contacts(id),
    invoice_number TEXT,
    title TEXT NOT NULL,
    item_header TEXT,
    item_list TEXT NOT NULL,
    item_footer TEXT,
    status_id BIGINT NOT NULL,
    payment_status_id BIGINT NOT NULL,
    amount_due BIGINT NOT NULL,
    remaining_balance BIGINT NOT NULL,
    due_date TEXT NOT NULL,
    expire_date TEXT,
    email TEXT,
    allow_partial_pay BIGINT NOT NULL,
    single_payment_min_amount BIGINT NOT NULL,
    single_payment_max_amount BIGINT NOT NULL,
    allow_overpayment BIGINT NOT NULL,
    notification_days_before_due_date BIGINT,
    notification_on_due_date BIGINT NOT NULL,
    notification_days_after_due_date BIGINT,
    cc_product_transaction_id TEXT REFERENCES product_transactions(id),
    ach_product_transaction_id TEXT REFERENCES product_transactions(id),
    is_active BIGINT NOT NULL,
    note TEXT,
    notification_email TEXT,
    attach_files_to_email BIGINT NOT NULL,
    customer_id TEXT,
    tags TEXT,
    pay_token TEXT NOT NULL UNIQUE,
    remind_ts BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX quick_invoices_location ON quick_invoices (location_id, created_ts);
CREATE INDEX quick_invoices_remind ON quick_invoices (remind_ts);
CREATE INDEX transactions_quick_invoice ON transactions (quick_invoice_id);
-- File storage of a location (POST /v2/productfiles), and the files of
-- invoices: the bytes live in the file store (a directory by default),
-- the rows say what they are.
CREATE TABLE product_files (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    title TEXT NOT NULL,
    product_file_credential_id TEXT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX product_files_location ON product_files (location_id, id);
CREATE TABLE quick_invoice_files (
    id TEXT PRIMARY KEY,
    quick_invoice_id TEXT NOT NULL REFERENCES quick_invoices(id),
    location_id TEXT NOT NULL,
    name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    storage_key TEXT NOT NULL,
    created_user_id TEXT,
    created_ts BIGINT NOT NULL
);
CREATE INDEX quick_invoice_files_invoice ON quick_invoice_files (quick_invoice_id, created_ts);
-- Files a mail carries (quick invoices with attach_files_to_email).
CREATE TABLE mail_attachments (
    mail_id TEXT NOT NULL REFERENCES mail_outbox(id),
    position BIGINT NOT NULL,
    name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    storage_key TEXT NOT NULL,
    PRIMARY KEY (mail_id, position)
);
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'productfiles.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'productfiles.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'productfiles.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'productfiles.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'productfiles.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'quickinvoices.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'quickinvoices.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'quickinvoices.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'quickinvoices.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'quickinvoices.read');
