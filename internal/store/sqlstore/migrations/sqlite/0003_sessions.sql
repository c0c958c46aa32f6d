-- Agent sessions (issue 5). tools is the JSON list of refs of an explicit
-- session ("null" otherwise); require_approval a JSON object
-- {"<server>": true | ["tool", ...]} ("null" when nothing is required).
-- token_hash is the lowercase hex SHA-256 of the session token.
CREATE TABLE sessions (
	id               TEXT PRIMARY KEY,
	parent_id        TEXT REFERENCES sessions (id),
	principal        TEXT NOT NULL,
	on_behalf_of     TEXT NOT NULL,
	tenant           TEXT NOT NULL,
	token_hash       TEXT NOT NULL UNIQUE,
	mode             TEXT NOT NULL,
	tools            TEXT NOT NULL,
	require_approval TEXT NOT NULL,
	revision         INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	created_by       TEXT NOT NULL,
	revoked_at       INTEGER
) STRICT;

CREATE INDEX sessions_parent ON sessions (parent_id);

-- Session events share the event log: request_id becomes optional and
-- session_id is added; exactly one of them is set. SQLite cannot drop a NOT
-- NULL constraint, so the table is rebuilt with its seq values (and so its
-- AUTOINCREMENT position) kept.
CREATE TABLE events_new (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	request_id TEXT REFERENCES requests (id),
	session_id TEXT REFERENCES sessions (id),
	type       TEXT NOT NULL,
	state      TEXT NOT NULL,
	actor      TEXT NOT NULL,
	at         INTEGER NOT NULL,
	CHECK ((request_id IS NULL) <> (session_id IS NULL))
) STRICT;
INSERT INTO events_new (seq, request_id, type, state, actor, at)
	SELECT seq, request_id, type, state, actor, at FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_request ON events (request_id, seq);
CREATE INDEX events_session ON events (session_id, seq);
