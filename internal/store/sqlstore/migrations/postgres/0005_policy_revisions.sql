-- Deployment policy revisions (policy.source: store, issue 6). policy is the
-- canonical YAML text, digest its lowercase hex SHA-256, diff a JSON list of
-- summary lines ("null" for none), approval_id the policy_change approval the
-- revision went through (NULL when it applied at once).
CREATE TABLE policy_revisions (
	revision    bigint PRIMARY KEY,
	policy      text NOT NULL,
	digest      text NOT NULL,
	created_at  bigint NOT NULL,
	created_by  text NOT NULL,
	approval_id text COLLATE "C" REFERENCES requests (id),
	diff        text NOT NULL
);

-- Policy events share the event log: exactly one of request_id, session_id
-- and policy_revision is set.
ALTER TABLE events ADD COLUMN policy_revision bigint REFERENCES policy_revisions (revision);
ALTER TABLE events DROP CONSTRAINT events_one_subject;
ALTER TABLE events ADD CONSTRAINT events_one_subject CHECK (num_nonnulls(request_id, session_id, policy_revision) = 1);
