-- +goose Up
-- The nodes of the installation (internal/platform/nodes): each running `gale serve` keeps its row
-- fresh while it runs and removes it at shutdown. A node reaches another at its address to
-- relay a stream to an agent the other holds.
CREATE TABLE nodes (
    id         UUID PRIMARY KEY,
    address    TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL
);

-- Which node holds each connected agent's WebSocket. connection_id tells a connection from
-- the one that replaced it, so the older one's goodbye does not erase the newer one's row.
CREATE TABLE agent_connections (
    device_id     UUID PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    node_id       UUID NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    connection_id UUID NOT NULL,
    connected_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX agent_connections_node ON agent_connections (node_id);

-- +goose Down
DROP TABLE agent_connections;
DROP TABLE nodes;
