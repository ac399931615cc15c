-- Boarding API v1 (ADR 0010): offers, merchant applications, their
-- sealed answers and the operators' tokens.
--
-- An offer's key rules and presentational state are JSON text.
CREATE TABLE boarding_offers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    vertical_name TEXT,
    partner_id TEXT,
    vertical_preset_id TEXT,
    pricing_bundle_id TEXT,
    vanity_url TEXT NOT NULL,
    vanity_domain TEXT,
    presentational_state TEXT NOT NULL,
    keys_allowable TEXT NOT NULL,
    keys_default_value TEXT NOT NULL,
    keys_fixed_value TEXT NOT NULL,
    keys_required_value TEXT NOT NULL,
    is_active BIGINT NOT NULL,
    is_published BIGINT NOT NULL,
    published_ts BIGINT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE UNIQUE INDEX boarding_offers_vanity_url ON boarding_offers (vanity_url);

-- `answers` holds every answer but the sensitive ones (SSNs, driver's
-- licence and bank account numbers), which live sealed in
-- boarding_secrets, one row per answer.
CREATE TABLE boarding_applications (
    id TEXT PRIMARY KEY,
    offer_id TEXT NOT NULL REFERENCES boarding_offers(id),
    user_id TEXT NOT NULL,
    vertical_preset_id TEXT,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    answers TEXT NOT NULL,
    signature TEXT,
    location_id TEXT REFERENCES locations(id),
    published_ts BIGINT,
    boarded_ts BIGINT,
    created_ts BIGINT NOT NULL,
    modified_ts BIGINT NOT NULL
);
CREATE INDEX boarding_applications_offer ON boarding_applications (offer_id, id);

CREATE TABLE boarding_secrets (
    id TEXT PRIMARY KEY,
    application_id TEXT NOT NULL REFERENCES boarding_applications(id),
    path TEXT NOT NULL,
    sealed TEXT NOT NULL,
    masked TEXT NOT NULL
);
CREATE UNIQUE INDEX boarding_secrets_path ON boarding_secrets (application_id, path);

-- Operators' bearer tokens for the offer administration endpoints,
-- stored as SHA-256 digests like API keys.
CREATE TABLE boarding_operator_tokens (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    name TEXT NOT NULL,
    created_ts BIGINT NOT NULL,
    revoked_ts BIGINT
);
CREATE UNIQUE INDEX boarding_operator_tokens_hash ON boarding_operator_tokens (token_hash);
