-- Notifications (issue 14): an outbox over the event log. notify_cursor holds
-- the seq of the last event the outbox has fanned out into deliveries; it
-- starts at the newest event when this migration runs, so an upgraded
-- database does not announce its history. A delivery is one event on one
-- channel: event_id is the id receivers deduplicate by (the same for every
-- channel and attempt), state pending | delivered | failed, next_at the
-- earliest next attempt, lease_owner/lease_until the instance working on it.
-- notify_messages keeps a channel's message for a request (Slack: channel and
-- ts as JSON), so later events update it in place. Times are INTEGER unix
-- milliseconds UTC. No foreign keys: deliveries need not stop the events or
-- requests they name from being removed.
CREATE TABLE notify_cursor (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	seq INTEGER NOT NULL
) STRICT;
INSERT INTO notify_cursor (id, seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;

CREATE TABLE deliveries (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id    TEXT NOT NULL,
	event_seq   INTEGER NOT NULL,
	channel     TEXT NOT NULL,
	request_id  TEXT NOT NULL,
	event_type  TEXT NOT NULL,
	event_state TEXT NOT NULL,
	actor       TEXT NOT NULL,
	event_at    INTEGER NOT NULL,
	state       TEXT NOT NULL,
	attempts    INTEGER NOT NULL,
	next_at     INTEGER NOT NULL,
	lease_owner TEXT NOT NULL,
	lease_until INTEGER,
	done_at     INTEGER,
	last_error  TEXT NOT NULL,
	UNIQUE (event_seq, channel)
) STRICT;
CREATE INDEX deliveries_due ON deliveries (state, next_at);
CREATE INDEX deliveries_request ON deliveries (request_id, channel, event_seq);

CREATE TABLE notify_messages (
	request_id TEXT NOT NULL,
	channel    TEXT NOT NULL,
	ref        TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (request_id, channel)
) STRICT;
