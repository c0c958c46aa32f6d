-- approval.Request.AnsweredAt: when a denial was delivered to an identical
-- re-send (unix milliseconds UTC; NULL until then).
ALTER TABLE requests ADD COLUMN answered_at bigint;
CREATE INDEX requests_identical ON requests (requested_by, arguments_hash);
