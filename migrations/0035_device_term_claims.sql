-- Device terms (ADR 0018, 0020): a device_terms_api_id claimed by the
-- request about to show its terms on a terminal, and released when that
-- request ends, so two requests naming the same api id never both prompt
-- a cardholder. A claim its request never released (the process died) is
-- taken over once stale.
CREATE TABLE device_term_claims (
    location_id TEXT NOT NULL,
    api_id TEXT NOT NULL,
    claim_id TEXT NOT NULL,
    claimed_ts BIGINT NOT NULL,
    PRIMARY KEY (location_id, api_id)
);
