-- Remembered grants (issue 12): "allow this principal to call this server's
-- tool, for arguments matching predicate, until expires_at, at most max_uses
-- times (0: no cap)". approved_by is the JSON list of the approvers who
-- attached the grant's terms ({"id", "groups"}); approvals the quorum of the
-- source approval. uses is counted by a conditional UPDATE (never past
-- max_uses, never after revoked_at or expires_at). Times are INTEGER unix
-- milliseconds UTC.
CREATE TABLE grants (
	id              TEXT PRIMARY KEY,
	principal       TEXT NOT NULL,
	on_behalf_of    TEXT NOT NULL,
	tenant          TEXT NOT NULL,
	server          TEXT NOT NULL,
	tool            TEXT NOT NULL,
	predicate       TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	max_uses        INTEGER NOT NULL CHECK (max_uses >= 0),
	uses            INTEGER NOT NULL CHECK (uses >= 0 AND (max_uses = 0 OR uses <= max_uses)),
	created_by      TEXT NOT NULL,
	approved_by     TEXT NOT NULL,
	approvals       INTEGER NOT NULL,
	reason          TEXT NOT NULL,
	source_approval TEXT NOT NULL UNIQUE REFERENCES requests (id),
	rule            TEXT NOT NULL,
	revoked_at      INTEGER,
	revoked_by      TEXT NOT NULL,
	revoke_reason   TEXT NOT NULL
) STRICT;
CREATE INDEX grants_call ON grants (principal, server, tool, expires_at);

-- One row per call a grant allowed: n numbers the uses of a grant from 1.
CREATE TABLE grant_uses (
	grant_id       TEXT NOT NULL REFERENCES grants (id),
	n              INTEGER NOT NULL,
	at             INTEGER NOT NULL,
	principal      TEXT NOT NULL,
	session_id     TEXT NOT NULL,
	arguments_hash TEXT NOT NULL,
	PRIMARY KEY (grant_id, n)
) STRICT;

-- Grant events share the event log: grant_id is added, and exactly one of
-- request_id, session_id, policy_revision and grant_id is set. SQLite cannot
-- change a CHECK constraint, so the table is rebuilt with its seq values
-- (and so its AUTOINCREMENT position) kept.
CREATE TABLE events_new (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	request_id      TEXT REFERENCES requests (id),
	session_id      TEXT REFERENCES sessions (id),
	policy_revision INTEGER REFERENCES policy_revisions (revision),
	grant_id        TEXT REFERENCES grants (id),
	type            TEXT NOT NULL,
	state           TEXT NOT NULL,
	actor           TEXT NOT NULL,
	at              INTEGER NOT NULL,
	CHECK ((request_id IS NOT NULL) + (session_id IS NOT NULL) + (policy_revision IS NOT NULL) + (grant_id IS NOT NULL) = 1)
) STRICT;
INSERT INTO events_new (seq, request_id, session_id, policy_revision, type, state, actor, at)
	SELECT seq, request_id, session_id, policy_revision, type, state, actor, at FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_request ON events (request_id, seq);
CREATE INDEX events_session ON events (session_id, seq);
CREATE INDEX events_grant ON events (grant_id, seq);
