-- Notifications (issue 14): an outbox over the event log. notify_cursor holds
-- the seq of the last event the outbox has fanned out into deliveries; it
-- starts at the newest event when this migration runs, so an upgraded
-- database does not announce its history. A delivery is one event on one
-- channel: event_id is the id receivers deduplicate by (the same for every
-- channel and attempt), state pending | delivered | failed, next_at the
-- earliest next attempt, lease_owner/lease_until the instance working on it.
-- notify_messages keeps a channel's message for a request (Slack: channel and
-- ts as JSON), so later events update it in place. Times are bigint unix
-- milliseconds UTC. No foreign keys: deliveries need not stop the events or
-- requests they name from being removed.
CREATE TABLE notify_cursor (
	id  integer PRIMARY KEY CHECK (id = 1),
	seq bigint NOT NULL
);
INSERT INTO notify_cursor (id, seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;

CREATE TABLE deliveries (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id    text NOT NULL,
	event_seq   bigint NOT NULL,
	channel     text NOT NULL,
	request_id  text COLLATE "C" NOT NULL,
	event_type  text NOT NULL,
	event_state text NOT NULL,
	actor       text NOT NULL,
	event_at    bigint NOT NULL,
	state       text NOT NULL,
	attempts    bigint NOT NULL,
	next_at     bigint NOT NULL,
	lease_owner text NOT NULL,
	lease_until bigint,
	done_at     bigint,
	last_error  text NOT NULL,
	UNIQUE (event_seq, channel)
);
CREATE INDEX deliveries_due ON deliveries (state, next_at);
CREATE INDEX deliveries_request ON deliveries (request_id, channel, event_seq);

CREATE TABLE notify_messages (
	request_id text COLLATE "C" NOT NULL,
	channel    text NOT NULL,
	ref        text NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (request_id, channel)
);
