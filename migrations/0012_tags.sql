-- Tags: a location's catalogue of labels (POST/PUT/GET/DELETE /v2/tags),
-- and the titles a transaction or recurring is tagged with, kept on the
-- record as a JSON array (the reference answers them as {id, title} with
-- the title as the id).
CREATE TABLE tags (
    id TEXT PRIMARY KEY,
    location_id TEXT NOT NULL REFERENCES locations(id),
    title TEXT NOT NULL,
    created_user_id TEXT,
    modified_user_id TEXT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX tags_location ON tags (location_id, id);
ALTER TABLE transactions ADD COLUMN tags TEXT;
ALTER TABLE recurrings ADD COLUMN tags TEXT;
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'tags.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'tags.create');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'tags.update');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'tags.delete');
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'tags.read');
