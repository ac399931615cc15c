-- What an API caller is made of changes rarely (ADR 0021): every
-- statement that changes the tables authentication reads (users, their
-- roles and permissions, locations, developers) moves auth_epoch, from any
-- process and on any node, in the writing transaction. A node keeps the
-- callers it authenticated with the epoch it read first, and uses one only
-- while the epoch has not moved.
CREATE TABLE auth_epoch (id BIGINT PRIMARY KEY, n BIGINT NOT NULL);
INSERT INTO auth_epoch (id, n) VALUES (1, 0);
CREATE OR REPLACE FUNCTION ferrogate_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; RETURN NULL; END $$;
CREATE TRIGGER auth_changed_users AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_auth_role_users AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON auth_role_users FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_roles AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON roles FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_role_permissions AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON role_permissions FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_locations AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON locations FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_developers AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON developers FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
