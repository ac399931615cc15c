-- Account vaults: tokens standing for a card or bank account. Full
-- numbers, SSN digits and licence numbers are sealed (AES-256-GCM, key id
-- prefix) by the application; only first six and last four are in clear.
CREATE TABLE account_vaults (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    contact_id TEXT REFERENCES contacts(id),
    payment_method TEXT NOT NULL,
    title TEXT,
    account_holder_name TEXT,
    account_number TEXT,
    first_six TEXT,
    last_four TEXT,
    exp_date TEXT,
    account_type TEXT,
    is_company BIGINT,
    routing TEXT,
    account_vault_api_id TEXT,
    accountvault_c1 TEXT,
    accountvault_c2 TEXT,
    accountvault_c3 TEXT,
    ach_sec_code TEXT,
    billing_address TEXT,
    billing_city TEXT,
    billing_state TEXT,
    billing_zip TEXT,
    billing_phone TEXT,
    customer_id TEXT,
    dl_number TEXT,
    dl_state TEXT,
    dob_year TEXT,
    ssn4 TEXT,
    has_recurring BIGINT NOT NULL,
    active BIGINT NOT NULL,
    cau_subscribed BIGINT NOT NULL,
    cau_subscribed_ts BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX account_vaults_location ON account_vaults (location_id, id);
CREATE INDEX account_vaults_contact ON account_vaults (contact_id);
CREATE UNIQUE INDEX account_vaults_api_id ON account_vaults (location_id, account_vault_api_id);

INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'accountvaults.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'accountvaults.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'accountvaults.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'accountvaults.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'accountvaultupdates.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'accountvaults.read');
