-- Initial schema. Times are INTEGER unix milliseconds UTC (optional ones NULL
-- when unset); durations are INTEGER milliseconds; lists are TEXT JSON ("null" for
-- a nil list). arguments is the redacted display copy, kept byte for byte.
CREATE TABLE requests (
	id                 TEXT PRIMARY KEY,
	state              TEXT NOT NULL,
	server             TEXT NOT NULL,
	tool               TEXT NOT NULL,
	arguments          TEXT,
	arguments_hash     TEXT NOT NULL,
	display_warnings   TEXT NOT NULL,
	tool_digest        TEXT NOT NULL,
	rule               TEXT NOT NULL,
	mode               TEXT NOT NULL,
	requested_by       TEXT NOT NULL,
	on_behalf_of       TEXT NOT NULL,
	tenant             TEXT NOT NULL,
	created_at         INTEGER NOT NULL,
	expires_at         INTEGER NOT NULL,
	required_approvals INTEGER NOT NULL,
	approvers          TEXT NOT NULL,
	valid_for_ms       INTEGER NOT NULL,
	reviews            TEXT NOT NULL,
	decided_by         TEXT NOT NULL,
	decided_at         INTEGER,
	reason             TEXT NOT NULL,
	consumed_at        INTEGER,
	dispatch_outcome   TEXT NOT NULL,
	held_by            TEXT NOT NULL,
	lease_until        INTEGER
) STRICT;

CREATE INDEX requests_state_expires ON requests (state, expires_at);
CREATE INDEX requests_requested_by_state ON requests (requested_by, state);

CREATE TABLE events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	request_id TEXT NOT NULL REFERENCES requests (id),
	type       TEXT NOT NULL,
	state      TEXT NOT NULL,
	actor      TEXT NOT NULL,
	at         INTEGER NOT NULL
) STRICT;

CREATE INDEX events_request ON events (request_id, seq);
