-- The sweeper's Due query (every sweep interval, default 1s) looks for
-- consumed requests whose dispatch outcome is not recorded and whose
-- holder's lease lapsed. Without an index of their own it read every
-- consumed request the store keeps (requests_state_expires matches only
-- state = 'consumed'), so a store that retains 90 days of requests
-- (retention.requests) paid for all of them every second. This partial
-- index holds only the requests between consume and outcome, a handful at
-- any time. Its key is the two columns its condition fixes: SQLite's
-- planner, which has no statistics, then prefers it to
-- requests_state_expires (two equalities against one), and lease_until
-- stays out of every index, so a lease renewal (an UPDATE of lease_until
-- alone) can still be a heap-only update on PostgreSQL.
CREATE INDEX requests_undispatched ON requests (state, dispatch_outcome)
	WHERE state = 'consumed' AND dispatch_outcome = '';
