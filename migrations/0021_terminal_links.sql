-- The router (ADR 0020): which node holds each connected device. A device
-- connects to one node over a WebSocket; a request for it arriving at
-- another node is handed over (PostgreSQL LISTEN/NOTIFY). A row is
-- written when a device registers and removed when its connection ends;
-- a row left by a node that died is recognised by the node's advisory
-- lock and removed by the next lookup. `link_id` tells one connection of
-- a device from the next (a reconnect replaces the row).
CREATE TABLE terminal_links (
    terminal_id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    link_id TEXT NOT NULL,
    connected_ts BIGINT NOT NULL
);
-- A message between nodes too long for a NOTIFY payload (8000 bytes): kept
-- here, sealed with the data key, until the receiving node reads it (the
-- notification carries only its id); unread ones are dropped after an hour.
CREATE TABLE router_messages (
    id TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    created_ts BIGINT NOT NULL
);
CREATE INDEX router_messages_created ON router_messages (created_ts);
