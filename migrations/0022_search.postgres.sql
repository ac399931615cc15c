-- Substring search over contacts (ADR 0021): trigram GIN indexes, which
-- PostgreSQL's planner uses for `ILIKE '%needle%'` by itself. The pg_trgm
-- extension ships with PostgreSQL (contrib) but creating it may need
-- rights the database user lacks: then the indexes are skipped and the
-- filters scan, as before (a notice says so).
DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm; EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'pg_trgm is not available (%): contact searches will scan', SQLERRM; END $$;
DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN CREATE INDEX IF NOT EXISTS contacts_first_name_trgm ON contacts USING gin (first_name gin_trgm_ops); CREATE INDEX IF NOT EXISTS contacts_last_name_trgm ON contacts USING gin (last_name gin_trgm_ops); CREATE INDEX IF NOT EXISTS contacts_email_trgm ON contacts USING gin (email gin_trgm_ops); CREATE INDEX IF NOT EXISTS contacts_company_name_trgm ON contacts USING gin (company_name gin_trgm_ops); END IF; END $$;
