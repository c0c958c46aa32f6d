-- The change feed (store.Store.Feed) needs nothing new on SQLite: one
-- transaction writes at a time, so seq order is commit order.

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
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	through    TEXT NOT NULL,
	through_at INTEGER NOT NULL,
	pruned_at  INTEGER NOT NULL,
	events     INTEGER NOT NULL
) STRICT;

-- Old terminal requests are found by creation time.
CREATE INDEX requests_created ON requests (created_at);

-- The number of pending tool-call requests (the approvals.max_pending cap,
-- and the pending gauge read every sweep) without counting rows: triggers
-- count requests into and out of pending. Pending = sum(created) -
-- sum(settled). One shard: SQLite has one writer at a time anyway.
CREATE TABLE pending_counts (
	shard   INTEGER PRIMARY KEY,
	created INTEGER NOT NULL,
	settled INTEGER NOT NULL
) STRICT;
INSERT INTO pending_counts (shard, created, settled)
	SELECT 0, COUNT(*), 0 FROM requests WHERE state = 'pending' AND kind IN ('', 'tool_call', 'resource_read', 'prompt_get');

CREATE TRIGGER requests_pending_created AFTER INSERT ON requests
	WHEN NEW.state = 'pending' AND NEW.kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
BEGIN
	UPDATE pending_counts SET created = created + 1 WHERE shard = 0;
END;
CREATE TRIGGER requests_pending_settled AFTER UPDATE OF state, kind ON requests
	WHEN OLD.state = 'pending' AND OLD.kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
		AND (NEW.state <> 'pending' OR NEW.kind NOT IN ('', 'tool_call', 'resource_read', 'prompt_get'))
BEGIN
	UPDATE pending_counts SET settled = settled + 1 WHERE shard = 0;
END;
CREATE TRIGGER requests_pending_deleted AFTER DELETE ON requests
	WHEN OLD.state = 'pending' AND OLD.kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
BEGIN
	UPDATE pending_counts SET settled = settled + 1 WHERE shard = 0;
END;

-- Durable consumers of the change feed (sqlstore consumeFeed): each keeps
-- its position (a store.Cursor as text, "<tx>.<seq>"; tx is always 0 on
-- SQLite) and when it last moved (unix ms), and moves it only in the
-- transaction that applies what it read. The notification outbox's cursor
-- (0006) becomes the consumer "notify" at the same place.
CREATE TABLE feed_cursors (
	consumer TEXT PRIMARY KEY,
	position TEXT NOT NULL,
	moved_at INTEGER NOT NULL
) STRICT;
INSERT INTO feed_cursors (consumer, position, moved_at)
	SELECT 'notify', '0.' || seq, CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM notify_cursor WHERE id = 1;
DROP TABLE notify_cursor;
