-- What an API caller is made of changes rarely (ADR 0021): every change to
-- the tables authentication reads (users, their roles and permissions,
-- locations, developers) moves auth_epoch, from any process, in the
-- writing transaction. A node keeps the callers it authenticated with the
-- epoch it read first, and uses one only while the epoch has not moved.
CREATE TABLE auth_epoch (id BIGINT PRIMARY KEY, n BIGINT NOT NULL);
INSERT INTO auth_epoch (id, n) VALUES (1, 0);
CREATE TRIGGER auth_epoch_users_insert AFTER INSERT ON users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_users_update AFTER UPDATE ON users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_users_delete AFTER DELETE ON users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_auth_role_users_insert AFTER INSERT ON auth_role_users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_auth_role_users_update AFTER UPDATE ON auth_role_users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_auth_role_users_delete AFTER DELETE ON auth_role_users BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_roles_insert AFTER INSERT ON roles BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_roles_update AFTER UPDATE ON roles BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_roles_delete AFTER DELETE ON roles BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_role_permissions_insert AFTER INSERT ON role_permissions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_role_permissions_update AFTER UPDATE ON role_permissions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_role_permissions_delete AFTER DELETE ON role_permissions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_locations_insert AFTER INSERT ON locations BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_locations_update AFTER UPDATE ON locations BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_locations_delete AFTER DELETE ON locations BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_developers_insert AFTER INSERT ON developers BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_developers_update AFTER UPDATE ON developers BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_developers_delete AFTER DELETE ON developers BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
