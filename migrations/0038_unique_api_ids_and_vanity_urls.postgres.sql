-- Two uniqueness rules that were missing (one file per engine: only the
-- clock and id functions differ).
--
-- 1. location_api_id is unique within its tenant (the tree below one
-- location under the root), as the reference says *_api_id keys are
-- unique: a lookup by it (locationinfos?location_api_id=) finds one
-- location. A tenant's locations share the first 67 characters of their
-- path, "/<root id>/<tenant id>/" (ids are 32 characters, ids.rs; a
-- location never moves to another tenant). Locations that already share
-- one keep it on the oldest (the smallest id: ids are time-ordered); the
-- others lose it, and their change log shows the value they had (an
-- UPDATE of location_api_id with its old value, by no user), so nothing
-- is lost silently and the migration never fails on old data.
INSERT INTO changelogs (id, location_id, model, model_id, action, user_id, created_ts)
SELECT lpad(to_hex(CAST(extract(epoch FROM now()) * 1000 AS BIGINT)), 12, '0') || substr(l.id, 13, 20), l.id, 'Location', l.id, 'UPDATE', NULL, CAST(extract(epoch FROM now()) AS BIGINT)
FROM locations l
WHERE l.location_api_id IS NOT NULL AND EXISTS (SELECT 1 FROM locations o
    WHERE o.location_api_id = l.location_api_id AND substr(o.path, 1, 67) = substr(l.path, 1, 67) AND o.id < l.id);
-- The detail of each entry just written (its id ends as the location's
-- does; an entry's own detail takes the entry's id: the tables differ).
INSERT INTO changelog_details (id, changelog_id, field, old_value, new_value)
SELECT c.id, c.id, 'location_api_id', l.location_api_id, NULL
FROM locations l JOIN changelogs c ON c.model_id = l.id AND substr(c.id, 13) = substr(l.id, 13, 20)
WHERE l.location_api_id IS NOT NULL AND EXISTS (SELECT 1 FROM locations o
    WHERE o.location_api_id = l.location_api_id AND substr(o.path, 1, 67) = substr(l.path, 1, 67) AND o.id < l.id);
UPDATE locations SET location_api_id = NULL, modified_ts = CAST(extract(epoch FROM now()) AS BIGINT)
WHERE location_api_id IS NOT NULL AND EXISTS (SELECT 1 FROM locations o
    WHERE o.location_api_id = locations.location_api_id AND substr(o.path, 1, 67) = substr(locations.path, 1, 67)
    AND o.id < locations.id);
CREATE UNIQUE INDEX locations_api_id ON locations (substr(path, 1, 67), location_api_id);

-- 2. An offer's vanity url is unique whatever its case ("acme" and "ACME"
-- were two offers); it is still stored and looked up as given. Offers
-- that already differ only in case keep theirs on the oldest; each other
-- one is renamed to its url (cut to 51 characters), a dash and the first
-- 12 characters of its offerId, so every url stays within 64 characters
-- and its old link no longer opens it (operators see the new one in
-- "boarding offer list").
UPDATE boarding_offers SET vanity_url = substr(vanity_url, 1, 51) || '-' || substr(id, 1, 12), modified_ts = CAST(extract(epoch FROM now()) AS BIGINT)
WHERE EXISTS (SELECT 1 FROM boarding_offers o WHERE lower(o.vanity_url) = lower(boarding_offers.vanity_url)
    AND (o.created_ts < boarding_offers.created_ts OR (o.created_ts = boarding_offers.created_ts AND o.id < boarding_offers.id)));
CREATE UNIQUE INDEX boarding_offers_vanity_url_folded ON boarding_offers (lower(vanity_url));
