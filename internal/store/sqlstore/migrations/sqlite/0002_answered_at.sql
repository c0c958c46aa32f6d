-- approval.Request.AnsweredAt: when a denial was delivered to the caller or an
-- identical re-send (unix milliseconds UTC; NULL until then). The index serves
-- OpenIdentical.
ALTER TABLE requests ADD COLUMN answered_at INTEGER;
CREATE INDEX requests_identical ON requests (requested_by, arguments_hash);
