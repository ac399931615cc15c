-- Hosted PayForm, AccountForm and payment page (ADR 0015).
--
-- One row per opened form. Its random id is the capability the page posts
-- back to; the hash-key that opened a PayForm or AccountForm is kept as a
-- digest, unique, so a used one is refused (the reference's one-time
-- hash-key registry). Card data is never stored here.
CREATE TABLE hosted_sessions (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    hash_digest TEXT UNIQUE,
    user_id TEXT NOT NULL REFERENCES users(id),
    developer_id TEXT NOT NULL,
    location_id TEXT NOT NULL REFERENCES locations(id),
    page_id TEXT,
    data TEXT NOT NULL,
    parent_origin TEXT,
    created_ts BIGINT NOT NULL,
    expires_ts BIGINT NOT NULL,
    claimed_until BIGINT,
    used_ts BIGINT,
    result TEXT
);
CREATE INDEX hosted_sessions_expiry ON hosted_sessions (expires_ts);

-- Tickets: card or bank data typed on a hosted page, sealed with the
-- keyring, single use, for a vault created with `ticket`.
CREATE TABLE tickets (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    user_id TEXT NOT NULL REFERENCES users(id),
    payment_method TEXT NOT NULL,
    account_sealed TEXT NOT NULL,
    first_six TEXT,
    last_four TEXT NOT NULL,
    created_ts BIGINT NOT NULL,
    expires_ts BIGINT NOT NULL,
    used_ts BIGINT
);
CREATE INDEX tickets_expiry ON tickets (expires_ts);

-- Hosted payment pages: a location's saved page and its encryption key.
CREATE TABLE hosted_payment_pages (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    product_transaction_id TEXT NOT NULL REFERENCES product_transactions(id),
    title TEXT NOT NULL,
    encryption_key TEXT NOT NULL,
    redirect_url_on_approve TEXT,
    redirect_url_on_decline TEXT,
    redirect_url_delay BIGINT,
    min_payment_amount BIGINT,
    max_payment_amount BIGINT,
    parent_send_message BIGINT NOT NULL DEFAULT 0,
    stylesheet_url TEXT,
    active BIGINT NOT NULL DEFAULT 1,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX hosted_payment_pages_location ON hosted_payment_pages (location_id, id);
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'hostedpaymentpages.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'hostedpaymentpages.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'hostedpaymentpages.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'hostedpaymentpages.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'hostedpaymentpages.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'tickets.create');
