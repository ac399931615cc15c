-- Tenant scope compares location paths as ranges ('/a/b/' <= p < '/a/b0'),
-- which needs byte order. SQLite compares text bytewise already; on
-- PostgreSQL the database's collation might not, so pin the column to "C".
ALTER TABLE locations ALTER COLUMN path TYPE TEXT COLLATE "C";
