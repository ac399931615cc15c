-- A location's sandbox test clock: seconds added to wall time for the
-- location's requests and records (0: real time). See ADR 0008.
ALTER TABLE locations ADD COLUMN clock_offset_s BIGINT NOT NULL DEFAULT 0;
