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

-- Lease renewals (store.Store.RenewLeases, every approvals.lease / 3)
-- rewrite lease_until of every held request. With full pages (the default
-- fillfactor, 100) PostgreSQL wrote each new row version on another page,
-- with a new entry in every index of requests, and the dead versions piled
-- up until autovacuum: about 0.4-0.5 s of the cluster's CPU per renewal of
-- 5,000 held requests, and the table grew by megabytes per renewal. With
-- room left in each page the new version stays on its page and no index
-- changes (a heap-only update; lease_until is in no index): about 0.06-0.1
-- s (docs/performance.md, "Idle CPU while holding"). Pages written from now
-- on keep 30 % free; existing pages get the room when rewritten.
ALTER TABLE requests SET (fillfactor = 70);
