-- approval.Request.Kind, Target and BaseRevision: approvals of policy changes
-- (session_policy, policy_change) beside tool calls. An empty kind is a tool call.
ALTER TABLE requests ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN target TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN base_revision INTEGER NOT NULL DEFAULT 0;
