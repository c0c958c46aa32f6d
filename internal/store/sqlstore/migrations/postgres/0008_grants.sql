-- Remembered grants (issue 12): "allow this principal to call this server's
-- tool, for arguments matching predicate, until expires_at, at most max_uses
-- times (0: no cap)". approved_by is the JSON list of the approvers who
-- attached the grant's terms ({"id", "groups"}); approvals the quorum of the
-- source approval. uses is counted by a conditional UPDATE (never past
-- max_uses, never after revoked_at or expires_at). Times are bigint unix
-- milliseconds UTC.
CREATE TABLE grants (
	id              text COLLATE "C" PRIMARY KEY,
	principal       text NOT NULL,
	on_behalf_of    text NOT NULL,
	tenant          text NOT NULL,
	server          text NOT NULL,
	tool            text NOT NULL,
	predicate       text NOT NULL,
	created_at      bigint NOT NULL,
	expires_at      bigint NOT NULL,
	max_uses        bigint NOT NULL CHECK (max_uses >= 0),
	uses            bigint NOT NULL CHECK (uses >= 0 AND (max_uses = 0 OR uses <= max_uses)),
	created_by      text NOT NULL,
	approved_by     text NOT NULL,
	approvals       bigint NOT NULL,
	reason          text NOT NULL,
	source_approval text COLLATE "C" NOT NULL UNIQUE REFERENCES requests (id),
	rule            text NOT NULL,
	revoked_at      bigint,
	revoked_by      text NOT NULL,
	revoke_reason   text NOT NULL
);
CREATE INDEX grants_call ON grants (principal, server, tool, expires_at);

-- One row per call a grant allowed: n numbers the uses of a grant from 1.
CREATE TABLE grant_uses (
	grant_id       text COLLATE "C" NOT NULL REFERENCES grants (id),
	n              bigint NOT NULL,
	at             bigint NOT NULL,
	principal      text NOT NULL,
	session_id     text NOT NULL,
	arguments_hash text NOT NULL,
	PRIMARY KEY (grant_id, n)
);

-- Grant events share the event log: exactly one of request_id, session_id,
-- policy_revision and grant_id is set.
ALTER TABLE events ADD COLUMN grant_id text COLLATE "C" REFERENCES grants (id);
ALTER TABLE events DROP CONSTRAINT events_one_subject;
ALTER TABLE events ADD CONSTRAINT events_one_subject CHECK (num_nonnulls(request_id, session_id, policy_revision, grant_id) = 1);
CREATE INDEX events_grant ON events (grant_id, seq);
