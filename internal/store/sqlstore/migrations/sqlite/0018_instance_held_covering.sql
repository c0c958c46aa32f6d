-- A lease renewal reads every request its instance holds (renew.go, step
-- 1: the id, and whether it still needs a holder, from state and
-- dispatch_outcome), every approvals.lease / 3. Through the index of 0014,
-- which held only held_by, that was a table look-up per held request (the
-- row with its arguments): at 10,000 held calls most of the renewal's CPU
-- and ≈ 2 % of a core while idle (docs/performance.md, "held22"). The
-- index now covers the read: the same rows, with the columns it reads.
DROP INDEX requests_instance_held;
CREATE INDEX requests_instance_held ON requests (held_by, id, state, dispatch_outcome)
	WHERE lease_until = 253402300799999;
