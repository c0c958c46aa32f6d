-- Signed-in sessions of the approver web inbox (issue 14). id is the hex
-- SHA-256 of the cookie value (the value itself is never stored),
-- token_hash the hex SHA-256 of the bearer token used to sign in; times are
-- unix milliseconds UTC.
CREATE TABLE web_sessions (
	id         TEXT PRIMARY KEY,
	token_hash TEXT NOT NULL,
	principal  TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

-- approval.Request.PolicyRevision: the revision of the deployment policy
-- that asked for the approval ("" before this version, and for approvals
-- of policy changes).
ALTER TABLE requests ADD COLUMN policy_revision TEXT NOT NULL DEFAULT '';
