-- The rest of the reference's user record (reference-facts 6.4): the
-- branding domain, the user's contact, login and terms data, interface
-- preferences (only what the user chose; defaults are applied on
-- reading), address and phone fields.
ALTER TABLE users ADD COLUMN domain_id TEXT;
ALTER TABLE users ADD COLUMN branding_domain_url TEXT;
ALTER TABLE users ADD COLUMN contact_id TEXT;
ALTER TABLE users ADD COLUMN current_login_ip TEXT;
ALTER TABLE users ADD COLUMN current_login_ts BIGINT;
ALTER TABLE users ADD COLUMN terms_condition_id TEXT;
ALTER TABLE users ADD COLUMN terms_accepted_ts BIGINT;
ALTER TABLE users ADD COLUMN terms_agree_ip TEXT;
ALTER TABLE users ADD COLUMN ui_prefs TEXT;
ALTER TABLE users ADD COLUMN address TEXT;
ALTER TABLE users ADD COLUMN city TEXT;
ALTER TABLE users ADD COLUMN state TEXT;
ALTER TABLE users ADD COLUMN zip TEXT;
ALTER TABLE users ADD COLUMN account_number TEXT;
ALTER TABLE users ADD COLUMN date_of_birth TEXT;
ALTER TABLE users ADD COLUMN email_trx_receipt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN company_name TEXT;
ALTER TABLE users ADD COLUMN home_phone TEXT;
ALTER TABLE users ADD COLUMN cell_phone TEXT;
ALTER TABLE users ADD COLUMN office_phone TEXT;
ALTER TABLE users ADD COLUMN office_ext_phone TEXT;
-- Existing users take their primary location's branding domain.
UPDATE users SET
    domain_id = (SELECT l.branding_domain_id FROM locations l WHERE l.id = users.location_id),
    branding_domain_url = (SELECT l.branding_domain_url FROM locations l WHERE l.id = users.location_id);
