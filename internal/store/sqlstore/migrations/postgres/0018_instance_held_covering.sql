-- A lease renewal reads every request its instance holds (renew.go, steps
-- 1 and 5: the id, and whether it still needs a holder, from state and
-- dispatch_outcome), every approvals.lease / 3. Through the index of 0014,
-- which held only held_by, that was a heap fetch per held request; the
-- index now carries the columns the read needs (an index-only scan where
-- the visibility map allows). SQLite's 0018 is the same index.
DROP INDEX requests_instance_held;
CREATE INDEX requests_instance_held ON requests (held_by) INCLUDE (id, state, dispatch_outcome)
	WHERE lease_until = 253402300799999;
