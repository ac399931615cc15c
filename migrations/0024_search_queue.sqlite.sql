-- Contacts are indexed for search once per group of writes, not once per
-- write (ADR 0021). FTS5 writes its pending terms out at every
-- savepoint, and the writer runs each job in a savepoint of the group's
-- transaction: indexing inside the job made every contact a segment of
-- its own and cost a third of the create rate. A new contact's id now
-- waits in `contacts_search_queue` (written in the job, so a job that
-- fails takes its ids back with it), and the statements listed in
-- `writer_before_commit` index the queue after the group's last job,
-- before its commit: readers never see a contact that is not yet
-- searchable.
CREATE TABLE writer_before_commit (position INTEGER PRIMARY KEY, sql TEXT NOT NULL);
CREATE TABLE contacts_search_queue (record_id TEXT PRIMARY KEY) WITHOUT ROWID;
-- The triggers go first: they name the id map, which is rebuilt.
DROP TRIGGER contacts_search_insert;
DROP TRIGGER contacts_search_delete;
DROP TRIGGER contacts_search_update;
-- The id map numbers new search rows itself (the largest number plus one;
-- a number is reused only after its search row was deleted with it).
CREATE TABLE contacts_search_rows_new (search_rowid INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE);
INSERT INTO contacts_search_rows_new (search_rowid, record_id) SELECT search_rowid, record_id FROM contacts_search_rows;
DROP TABLE contacts_search_rows;
ALTER TABLE contacts_search_rows_new RENAME TO contacts_search_rows;
CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN INSERT OR IGNORE INTO contacts_search_queue (record_id) VALUES (new.id); END;
CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN DELETE FROM contacts_search WHERE rowid = (SELECT search_rowid FROM contacts_search_rows WHERE record_id = old.id); DELETE FROM contacts_search_rows WHERE record_id = old.id; DELETE FROM contacts_search_queue WHERE record_id = old.id; END;
-- A contact already indexed is changed in place; one still queued is
-- indexed with the values it has at the commit.
CREATE TRIGGER contacts_search_update AFTER UPDATE OF first_name, last_name, email, company_name ON contacts BEGIN UPDATE contacts_search SET first_name = new.first_name, last_name = new.last_name, email = new.email, company_name = new.company_name WHERE rowid = (SELECT search_rowid FROM contacts_search_rows WHERE record_id = new.id); END;
INSERT INTO writer_before_commit (position, sql) VALUES
  (1, 'INSERT INTO contacts_search_rows (record_id) SELECT q.record_id FROM contacts_search_queue q WHERE EXISTS (SELECT 1 FROM contacts c WHERE c.id = q.record_id) AND NOT EXISTS (SELECT 1 FROM contacts_search_rows m WHERE m.record_id = q.record_id)'),
  (2, 'INSERT INTO contacts_search (rowid, first_name, last_name, email, company_name) SELECT m.search_rowid, c.first_name, c.last_name, c.email, c.company_name FROM contacts_search_queue q JOIN contacts_search_rows m ON m.record_id = q.record_id JOIN contacts c ON c.id = q.record_id WHERE NOT EXISTS (SELECT 1 FROM contacts_search s WHERE s.rowid = m.search_rowid)'),
  (3, 'DELETE FROM contacts_search_queue');
