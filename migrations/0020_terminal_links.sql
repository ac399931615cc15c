-- The router (ADR 0019): which node holds each connected device. A device
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
