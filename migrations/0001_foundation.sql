-- Ferrogate foundation schema. One file serves SQLite and PostgreSQL:
-- only TEXT and BIGINT columns (ids, dates and JSON are text; booleans,
-- timestamps and money in minor units are integers).

CREATE TABLE developers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_ts BIGINT NOT NULL
);

-- The location tree. `path` is '/root/.../self/': a caller's scope is the
-- path range of its own location, found with a plain b-tree index.
CREATE TABLE locations (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    parent_id TEXT REFERENCES locations(id),
    name TEXT NOT NULL,
    branding_domain_url TEXT,
    branding_domain_id TEXT,
    account_number TEXT,
    address1 TEXT,
    address2 TEXT,
    city TEXT,
    state TEXT,
    zip_code TEXT,
    office_phone TEXT,
    office_ext_phone TEXT,
    fax TEXT,
    aba TEXT,
    dda TEXT,
    tz TEXT,
    receipt_logo TEXT,
    email_reply_to TEXT,
    location_api_id TEXT,
    location_api_key TEXT,
    ticket_hash_key TEXT,
    location_c1 TEXT,
    location_c2 TEXT,
    location_c3 TEXT,
    developer_company_id TEXT,
    default_cc TEXT,
    default_ach TEXT,
    contact_email_trx_receipt_default BIGINT,
    recurring_notification_days_default BIGINT,
    show_contact_notes BIGINT,
    show_contact_files BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE UNIQUE INDEX locations_path ON locations (path);
CREATE INDEX locations_parent ON locations (parent_id);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    username TEXT NOT NULL,
    email TEXT,
    first_name TEXT,
    last_name TEXT,
    user_type_id BIGINT,
    status BIGINT NOT NULL,
    tz TEXT,
    locale TEXT,
    api_key_hash TEXT,
    hash_key_enc TEXT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE UNIQUE INDEX users_username ON users (username);
CREATE INDEX users_location ON users (location_id, id);

-- Roles are global; `is_admin` grants every permission, present and future.
CREATE TABLE roles (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    is_admin BIGINT NOT NULL
);
CREATE TABLE role_permissions (
    role_id TEXT NOT NULL REFERENCES roles(id),
    permission TEXT NOT NULL,
    PRIMARY KEY (role_id, permission)
);

CREATE TABLE auth_role_users (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    user_id TEXT NOT NULL REFERENCES users(id),
    auth_role_id TEXT NOT NULL REFERENCES roles(id),
    created_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE UNIQUE INDEX auth_role_users_pair ON auth_role_users (user_id, auth_role_id);
CREATE INDEX auth_role_users_location ON auth_role_users (location_id, id);

-- Deposit accounts of a location. Display and processing settings live in
-- the `settings` JSON text; the columns are what queries need.
CREATE TABLE product_transactions (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    payment_method TEXT NOT NULL,
    processor TEXT NOT NULL,
    title TEXT NOT NULL,
    active BIGINT NOT NULL,
    settings TEXT NOT NULL,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX product_transactions_location ON product_transactions (location_id, id);

CREATE TABLE contacts (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    last_name TEXT NOT NULL,
    first_name TEXT,
    company_name TEXT,
    account_number TEXT,
    contact_api_id TEXT,
    contact_balance TEXT,
    contact_c1 TEXT,
    contact_c2 TEXT,
    contact_c3 TEXT,
    address TEXT,
    city TEXT,
    state TEXT,
    zip TEXT,
    email TEXT,
    email_trx_receipt BIGINT,
    home_phone TEXT,
    cell_phone TEXT,
    office_phone TEXT,
    office_ext_phone TEXT,
    date_of_birth TEXT,
    header_message TEXT,
    header_message_type BIGINT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX contacts_location_created ON contacts (location_id, created_ts, id);
CREATE UNIQUE INDEX contacts_api_id ON contacts (location_id, contact_api_id);

CREATE TABLE notes (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    resource TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    note TEXT,
    visibility_group_id TEXT,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX notes_resource ON notes (resource_id, id);
CREATE INDEX notes_location ON notes (location_id, id);

-- Change logs are written in the same transaction as the change.
CREATE TABLE changelogs (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL,
    model TEXT NOT NULL,
    model_id TEXT NOT NULL,
    action TEXT NOT NULL,
    user_id TEXT,
    created_ts BIGINT NOT NULL
);
CREATE INDEX changelogs_model ON changelogs (model_id, id);

CREATE TABLE changelog_details (
    id TEXT PRIMARY KEY,
    changelog_id TEXT NOT NULL REFERENCES changelogs(id),
    field TEXT NOT NULL,
    old_value TEXT,
    new_value TEXT
);
CREATE INDEX changelog_details_changelog ON changelog_details (changelog_id);

INSERT INTO roles (id, title, is_admin) VALUES ('1', 'Administrator', 1);
INSERT INTO roles (id, title, is_admin) VALUES ('2', 'Read only', 0);
INSERT INTO roles (id, title, is_admin) VALUES ('132', 'Integration', 0);
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'locationinfos.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'contacts.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'contacts.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'contacts.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'contacts.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'locations.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'locations.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'locations.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'locations.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'notes.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'notes.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'notes.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'notes.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'users.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'users.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'users.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'users.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'authroleusers.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'authroleusers.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'authroleusers.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'authroleusers.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'locationinfos.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'contacts.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'locations.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'notes.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'users.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'authroleusers.read');
