-- The data keys that have sealed values in this database. A process whose
-- keys cannot open them refuses to start, instead of reading secrets back
-- as nothing. `ferrogate keys rotate` retires the keys it replaced.
CREATE TABLE data_keys (
    key_id TEXT PRIMARY KEY,
    created_ts BIGINT NOT NULL,
    retired_ts BIGINT
);
