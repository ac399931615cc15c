-- Substring search over contacts (ADR 0021): an FTS5 table with the
-- trigram tokenizer answers `LIKE '%needle%'` for needles of three
-- characters or more without reading every contact of the scope. Its
-- rows are numbered by its own rowid, mapped to the contact's id (a
-- contact's own rowid is not stable: VACUUM may renumber it). Triggers
-- keep both in step with contacts, in the writing transaction
-- (migration 24 changes how new contacts are indexed).
CREATE VIRTUAL TABLE contacts_search USING fts5(first_name, last_name, email, company_name, tokenize = 'trigram');
CREATE TABLE contacts_search_rows (record_id TEXT PRIMARY KEY, search_rowid INTEGER NOT NULL);
CREATE UNIQUE INDEX contacts_search_rows_rowid ON contacts_search_rows (search_rowid);
INSERT INTO contacts_search (rowid, first_name, last_name, email, company_name) SELECT rowid, first_name, last_name, email, company_name FROM contacts;
INSERT INTO contacts_search_rows (record_id, search_rowid) SELECT id, rowid FROM contacts;
CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN INSERT INTO contacts_search (first_name, last_name, email, company_name) VALUES (new.first_name, new.last_name, new.email, new.company_name); INSERT INTO contacts_search_rows (record_id, search_rowid) VALUES (new.id, last_insert_rowid()); END;
CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN DELETE FROM contacts_search WHERE rowid = (SELECT search_rowid FROM contacts_search_rows WHERE record_id = old.id); DELETE FROM contacts_search_rows WHERE record_id = old.id; END;
CREATE TRIGGER contacts_search_update AFTER UPDATE OF first_name, last_name, email, company_name ON contacts BEGIN UPDATE contacts_search SET first_name = new.first_name, last_name = new.last_name, email = new.email, company_name = new.company_name WHERE rowid = (SELECT search_rowid FROM contacts_search_rows WHERE record_id = new.id); END;
