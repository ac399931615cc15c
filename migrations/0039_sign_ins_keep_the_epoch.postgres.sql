-- A sign-in writes its bookkeeping onto the user (last_login_ts,
-- current_login_ts, current_login_ip, login_attempts, login_locked_until),
-- and the statement trigger of migration 23 moved auth_epoch for it, even
-- for an update of no row: every sign-in, right or wrong, made every node
-- drop the callers and configuration it keeps (ADR 0021, 0024) and queued
-- on the epoch row. Nothing kept reads those columns. An update of users
-- now moves the epoch only when it sets another column; every column but
-- those five is listed (tests/it/sign_in.rs checks that a new column is).
DROP TRIGGER auth_changed_users ON users;
CREATE TRIGGER auth_changed_users AFTER INSERT OR DELETE OR TRUNCATE ON users FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_users_update AFTER UPDATE OF
    id, location_id, username, email, first_name, last_name, user_type_id, status, tz, locale, api_key_hash, hash_key_enc, created_user_id, modified_user_id, created_ts, modified_ts, password_hash, requires_new_password, domain_id, branding_domain_url, contact_id, terms_condition_id, terms_accepted_ts, terms_agree_ip, ui_prefs, address, city, state, zip, account_number, date_of_birth, email_trx_receipt, company_name, home_phone, cell_phone, office_phone, office_ext_phone
    ON users FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
