-- Agent sessions (issue 5). tools is the JSON list of refs of an explicit
-- session ("null" otherwise); require_approval a JSON object
-- {"<server>": true | ["tool", ...]} ("null" when nothing is required).
-- token_hash is the lowercase hex SHA-256 of the session token.
CREATE TABLE sessions (
	id               text COLLATE "C" PRIMARY KEY,
	parent_id        text COLLATE "C" REFERENCES sessions (id),
	principal        text NOT NULL,
	on_behalf_of     text NOT NULL,
	tenant           text NOT NULL,
	token_hash       text NOT NULL UNIQUE,
	mode             text NOT NULL,
	tools            text NOT NULL,
	require_approval text NOT NULL,
	revision         bigint NOT NULL,
	created_at       bigint NOT NULL,
	created_by       text NOT NULL,
	revoked_at       bigint
);

CREATE INDEX sessions_parent ON sessions (parent_id);

-- Session events share the event log: request_id becomes optional and
-- session_id is added; exactly one of them is set.
ALTER TABLE events ALTER COLUMN request_id DROP NOT NULL;
ALTER TABLE events ADD COLUMN session_id text COLLATE "C" REFERENCES sessions (id);
ALTER TABLE events ADD CONSTRAINT events_one_subject CHECK ((request_id IS NULL) <> (session_id IS NULL));
CREATE INDEX events_session ON events (session_id, seq);
