-- Deployment policy revisions (policy.source: store, issue 6). policy is the
-- canonical YAML text, digest its lowercase hex SHA-256, diff a JSON list of
-- summary lines ("null" for none), approval_id the policy_change approval the
-- revision went through (NULL when it applied at once).
CREATE TABLE policy_revisions (
	revision    INTEGER PRIMARY KEY,
	policy      TEXT NOT NULL,
	digest      TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	created_by  TEXT NOT NULL,
	approval_id TEXT REFERENCES requests (id),
	diff        TEXT NOT NULL
) STRICT;

-- Policy events share the event log: policy_revision is added, and exactly
-- one of request_id, session_id and policy_revision is set. SQLite cannot
-- change a CHECK constraint, so the table is rebuilt with its seq values
-- (and so its AUTOINCREMENT position) kept.
CREATE TABLE events_new (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	request_id      TEXT REFERENCES requests (id),
	session_id      TEXT REFERENCES sessions (id),
	policy_revision INTEGER REFERENCES policy_revisions (revision),
	type            TEXT NOT NULL,
	state           TEXT NOT NULL,
	actor           TEXT NOT NULL,
	at              INTEGER NOT NULL,
	CHECK ((request_id IS NOT NULL) + (session_id IS NOT NULL) + (policy_revision IS NOT NULL) = 1)
) STRICT;
INSERT INTO events_new (seq, request_id, session_id, type, state, actor, at)
	SELECT seq, request_id, session_id, type, state, actor, at FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_request ON events (request_id, seq);
CREATE INDEX events_session ON events (session_id, seq);
