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

-- The number of pending tool-call requests (the approvals.max_pending cap,
-- and the pending gauge read every sweep) without counting rows: triggers
-- count requests into and out of pending, in 16 shards so that concurrent
-- decisions rarely wait for the same row. Pending = sum(created) -
-- sum(settled). A creator that checks the total holds the total's
-- advisory lock, so creators see each other's counts; a decision
-- committing meanwhile only makes the count look higher (never lets the
-- cap be passed).
CREATE TABLE pending_counts (
	shard   bigint PRIMARY KEY,
	created bigint NOT NULL,
	settled bigint NOT NULL
);
INSERT INTO pending_counts (shard, created, settled) SELECT s, 0, 0 FROM generate_series(0, 15) AS s;
UPDATE pending_counts SET created = (SELECT COUNT(*) FROM requests WHERE state = 'pending' AND kind IN ('', 'tool_call', 'resource_read', 'prompt_get'))
	WHERE shard = 0;

CREATE FUNCTION toolgate_count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		IF NEW.state = 'pending' AND NEW.kind IN ('', 'tool_call', 'resource_read', 'prompt_get') THEN
			UPDATE pending_counts SET created = created + 1 WHERE shard = (hashtext(NEW.id) & 15);
		END IF;
		RETURN NEW;
	END IF;
	IF OLD.state = 'pending' AND OLD.kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
		AND (TG_OP = 'DELETE' OR NEW.state <> 'pending' OR NEW.kind NOT IN ('', 'tool_call', 'resource_read', 'prompt_get')) THEN
		UPDATE pending_counts SET settled = settled + 1 WHERE shard = (hashtext(OLD.id) & 15);
	END IF;
	RETURN NULL;
END;
$$;
CREATE TRIGGER requests_count_pending AFTER INSERT OR UPDATE OF state, kind OR DELETE ON requests
	FOR EACH ROW EXECUTE FUNCTION toolgate_count_pending();

-- Durable consumers of the change feed (sqlstore consumeFeed): each keeps
-- its position (a store.Cursor as text, "<tx>.<seq>") and when it last
-- moved (unix ms), and moves it only in the transaction that applies what
-- it read. The notification outbox's cursor (0006) becomes the consumer
-- "notify": its seq was the last event fanned out, and every event written
-- before this migration has xid 1, so "1.<seq>" is the same place.
CREATE TABLE feed_cursors (
	consumer text PRIMARY KEY,
	position text NOT NULL,
	moved_at bigint NOT NULL
);
INSERT INTO feed_cursors (consumer, position, moved_at)
	SELECT 'notify', '1.' || seq, (extract(epoch FROM now()) * 1000)::bigint FROM notify_cursor WHERE id = 1;
DROP TABLE notify_cursor;
