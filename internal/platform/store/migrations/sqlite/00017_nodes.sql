-- +goose Up
-- The nodes of the installation (internal/platform/nodes): each running `gale serve` keeps its row
-- fresh while it runs and removes it at shutdown. A node reaches another at its address to
-- relay a stream to an agent the other holds.
CREATE TABLE nodes (
    id         TEXT PRIMARY KEY,
    address    TEXT NOT NULL,
    started_at TIMESTAMP NOT NULL,
    seen_at    TIMESTAMP NOT NULL
);

-- Which node holds each connected agent's WebSocket. connection_id tells a connection from
-- the one that replaced it, so the older one's goodbye does not erase the newer one's row.
CREATE TABLE agent_connections (
    device_id     TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    node_id       TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    connection_id TEXT NOT NULL,
    connected_at  TIMESTAMP NOT NULL
);
CREATE INDEX agent_connections_node ON agent_connections (node_id);

-- +goose Down
DROP TABLE agent_connections;
DROP TABLE nodes;
