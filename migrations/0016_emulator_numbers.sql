-- The Authorize.Net emulator (ADR 0016): their clients expect numeric
-- transaction and subscription ids (the schema's numericString; many
-- integrations keep them in integer columns), ours are 32 hex characters.
-- Each record the emulator answers gets a random 11-digit number once;
-- lookups by number still go through the caller's tenant scope.
CREATE TABLE emulator_numbers (
    number BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    record_id TEXT NOT NULL,
    UNIQUE (kind, record_id)
);
