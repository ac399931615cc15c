-- Terminals, device terms and signatures (ADR 0018). A terminal keeps
-- only the SHA-256 digest of its device secret (shown once, in the create
-- answer); `last_registration_ts` and `is_provisioned` are written by the
-- device connection when it registers. A device term's outcome is its
-- `reason_code_id`: NULL while the prompt has not been answered.
CREATE TABLE terminals (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    active BIGINT NOT NULL,
    title TEXT,
    serial_number TEXT NOT NULL,
    terminal_number TEXT,
    mac_address TEXT,
    local_ip_address TEXT,
    port BIGINT NOT NULL,
    last_registration_ts BIGINT,
    terminal_timeouts TEXT NOT NULL,
    terminal_application_id TEXT,
    terminal_manufacturer_id TEXT,
    model TEXT,
    debit BIGINT NOT NULL,
    emv BIGINT NOT NULL,
    header_line_1 TEXT,
    header_line_2 TEXT,
    header_line_3 TEXT,
    header_line_4 TEXT,
    header_line_5 TEXT,
    trailer_line_1 TEXT,
    trailer_line_2 TEXT,
    trailer_line_3 TEXT,
    trailer_line_4 TEXT,
    trailer_line_5 TEXT,
    communication_type TEXT,
    is_provisioned BIGINT NOT NULL,
    default_checkin TEXT,
    default_checkout TEXT,
    default_room_rate BIGINT,
    default_room_number TEXT,
    terminal_cvm_id BIGINT,
    tip_enable BIGINT NOT NULL,
    cashback_enable BIGINT NOT NULL,
    print_enable BIGINT NOT NULL,
    sig_capture_enable BIGINT NOT NULL,
    secret_digest TEXT NOT NULL,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX terminals_location ON terminals (location_id, id);
CREATE TABLE device_terms (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    terminal_id TEXT NOT NULL REFERENCES terminals(id),
    require_signature BIGINT NOT NULL,
    terms_conditions TEXT NOT NULL,
    device_terms_api_id TEXT,
    reason_code_id BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX device_terms_location ON device_terms (location_id, created_ts);
CREATE INDEX device_terms_terminal ON device_terms (terminal_id);
-- An api id names one device term per location (a retry reuses it).
CREATE UNIQUE INDEX device_terms_api_id ON device_terms (location_id, device_terms_api_id);
-- A signature image (base64 text, at most 256 KiB decoded) attached to an
-- account vault, transaction, recurring or device term of a location.
CREATE TABLE signatures (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    resource TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    signature TEXT NOT NULL,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX signatures_location ON signatures (location_id, id);
CREATE INDEX signatures_resource ON signatures (resource_id, resource);
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'terminals.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'terminals.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'terminals.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'terminals.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'terminals.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'deviceterms.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'deviceterms.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'deviceterms.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'signatures.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'signatures.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'signatures.read');
