-- The change feed (store.Store.Feed): each event records the id of the
-- transaction that wrote it, so a reader can return only events whose
-- transaction is older than every transaction still running (xid <
-- pg_snapshot_xmin(pg_current_snapshot())): sequence numbers are taken at
-- insert, not at commit, and paging by seq alone could skip an event that
-- commits after one with a higher seq. Rows written before this migration
-- get xid 1, below every real transaction id, so they come first, in seq
-- order. The constant default keeps ADD COLUMN from rewriting the table.
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE events ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX events_feed ON events (xid, seq);

-- Pending caps are counted inside the creating transaction: these keep the
-- counts to the pending rows (per principal, and in total).
CREATE INDEX requests_pending ON requests (requested_by) WHERE state = 'pending';
-- Session policy requests are counted per target session.
CREATE INDEX requests_target ON requests (target, state) WHERE target <> '';
-- A request's principal is looked up among the sessions (revocation check
-- at create).
CREATE INDEX sessions_principal ON sessions (principal);

-- Retention (store.Store.Prune): where the pruned prefix of the event log
-- ends. One row once anything was pruned: the feed position (a
-- store.Cursor as text, "<tx>.<seq>") and time of the last event deleted,
-- when that was, and how many events were deleted in all. A verifier of the
-- log starts after it.
CREATE TABLE events_pruned (
	id         bigint PRIMARY KEY CHECK (id = 1),
	through    text NOT NULL,
	through_at bigint NOT NULL,
	pruned_at  bigint NOT NULL,
	events     bigint NOT NULL
);

-- Old terminal requests are found by creation time.
CREATE INDEX requests_created ON requests (created_at);
