-- +goose Up
-- Management posture (internal/domains/devices): the management products each device's agent found
-- (other RMMs, remote access, endpoint security, backup, patch management), replaced with
-- every inventory that carries them. posture_at is when the device last reported them; NULL
-- means never (its agent does not detect them, or has not reported yet).
ALTER TABLE devices ADD COLUMN posture_at TIMESTAMP;
CREATE TABLE device_posture (
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    product   TEXT NOT NULL,
    name      TEXT NOT NULL,
    category  TEXT NOT NULL,
    status    TEXT NOT NULL,
    version   TEXT NOT NULL,
    evidence  TEXT NOT NULL,
    PRIMARY KEY (device_id, product)
);
CREATE INDEX device_posture_product ON device_posture (product, device_id);

-- +goose Down
DROP TABLE device_posture;
ALTER TABLE devices DROP COLUMN posture_at;
