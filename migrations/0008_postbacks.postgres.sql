-- PostgreSQL numbers deliveries with a sequence (SQLite's INTEGER PRIMARY
-- KEY does by itself).
ALTER TABLE postback_deliveries ALTER COLUMN seq TYPE BIGINT;
CREATE SEQUENCE postback_deliveries_seq OWNED BY postback_deliveries.seq;
ALTER TABLE postback_deliveries ALTER COLUMN seq SET DEFAULT nextval('postback_deliveries_seq');
