-- Postback configs and the delivery outbox. A delivery row is written in
-- the same transaction as the change it reports; workers lease rows
-- (PostgreSQL: FOR UPDATE SKIP LOCKED), send them and record the outcome.
CREATE TABLE postback_configs (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    resource TEXT NOT NULL,
    product_transaction_id TEXT REFERENCES product_transactions(id),
    url TEXT NOT NULL,
    on_create BIGINT NOT NULL,
    on_update BIGINT NOT NULL,
    on_delete BIGINT NOT NULL,
    is_active BIGINT NOT NULL,
    format TEXT NOT NULL,
    number_of_attempts BIGINT NOT NULL,
    attempt_interval BIGINT NOT NULL,
    expands TEXT NOT NULL,
    basic_auth_username TEXT,
    basic_auth_password TEXT,
    signing_secret TEXT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX postback_configs_match ON postback_configs (location_id, resource);

-- `seq` orders the events of one record (PostgreSQL: a sequence, below).
CREATE TABLE postback_deliveries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    postback_config_id TEXT NOT NULL,
    location_id TEXT NOT NULL,
    resource TEXT NOT NULL,
    event_type TEXT NOT NULL,
    record_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    due_ms BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until_ms BIGINT,
    last_response_code BIGINT,
    last_error TEXT,
    last_response TEXT,
    last_attempt_ts BIGINT,
    next_attempt_ts BIGINT,
    delivered_ts BIGINT,
    event_ms BIGINT NOT NULL,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
-- Workers read pending rows only, oldest first: the log's delivered rows
-- are never scanned.
CREATE INDEX postback_deliveries_pending ON postback_deliveries (seq) WHERE status = 'pending';
CREATE INDEX postback_deliveries_chain ON postback_deliveries (postback_config_id, record_id, seq) WHERE status = 'pending';
CREATE INDEX postback_deliveries_log ON postback_deliveries (postback_config_id, id);
CREATE INDEX postback_deliveries_location ON postback_deliveries (location_id, id);

INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackconfigs.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackconfigs.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackconfigs.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackconfigs.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackdeliveries.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'postbackdeliveries.redeliver');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'postbackconfigs.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'postbackdeliveries.read');
