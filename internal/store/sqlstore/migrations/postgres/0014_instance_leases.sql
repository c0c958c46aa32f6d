-- Instance leases (docs/architecture.md, "Instance leases"). A held
-- request's lease was renewed row by row: every approvals.lease / 3 the
-- store rewrote lease_until of every held request (about 25 us of CPU per
-- row on SQLite, 12-21 us of the cluster's on PostgreSQL), the most of
-- what holding 10,000 calls idle cost (docs/performance.md, "Idle CPU
-- while holding"). Now each instance renews one row of its own here, and
-- a request it holds carries the marker 253402300799999
-- (9999-12-31T23:59:59.999Z in unix ms) in lease_until: its effective
-- lease is its holder's row. A binary from before this migration reads
-- the marker as a lease that never lapses, so it never takes over or
-- sweeps a request a newer instance holds; newer binaries still honour
-- concrete lease times (docs/deploy.md, "Upgrading to migration 14").
CREATE TABLE instance_leases (
	instance TEXT PRIMARY KEY,
	lease_until BIGINT NOT NULL
);

-- The requests an instance holds under its instance lease, which each
-- renewal reads: only marked rows are in it, so a renewal does not read
-- the requests the store keeps after they were settled.
CREATE INDEX requests_instance_held ON requests (held_by)
	WHERE lease_until = 253402300799999;
