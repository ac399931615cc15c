-- Reading product transactions is part of the read-only and integration roles.
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'producttransactions.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'producttransactions.read');
