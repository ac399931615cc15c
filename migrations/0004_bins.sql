-- BIN lookup: issuer data imported with `ferrogate bins import`. Every
-- prefix is stored as an 8-digit range: the BIN 411111 is 41111100 to
-- 41111199. `span_digits` is the width class of a range (the least c with
-- range_end - range_start + 1 <= 10^c); a lookup searches one class at a
-- time inside the only window of starts that can contain the BIN.
-- Brand and PAN length need no rows: they come from built-in ranges.

CREATE TABLE bin_ranges (
    range_start BIGINT NOT NULL,
    range_end BIGINT NOT NULL,
    span_digits BIGINT NOT NULL,
    prefix_len BIGINT NOT NULL,
    scheme TEXT,
    category TEXT,
    card_type TEXT,
    prepaid BIGINT,
    country_a2 TEXT,
    country_a3 TEXT,
    country_numeric TEXT,
    country_name TEXT,
    bank_name TEXT,
    bank_url TEXT,
    bank_phone TEXT,
    bank_city TEXT,
    pan_length BIGINT,
    regulated BIGINT,
    card_class TEXT,
    source TEXT NOT NULL,
    created_ts BIGINT NOT NULL,
    PRIMARY KEY (range_start, range_end)
);
CREATE INDEX bin_ranges_lookup ON bin_ranges (span_digits, range_start);
CREATE INDEX bin_ranges_source ON bin_ranges (source);

-- Any user with the read-only or integration role may look BINs up
-- (the administrator role holds every permission).
INSERT INTO role_permissions (role_id, permission) VALUES ('2', 'bins.read');
INSERT INTO role_permissions (role_id, permission) VALUES ('132', 'bins.read');
