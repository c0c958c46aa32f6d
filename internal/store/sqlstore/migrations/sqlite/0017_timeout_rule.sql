-- approval.Request.TimeoutRule: the rule whose timeout a held call's
-- request took (policy.Decision.TimeoutRule). With several matching
-- approve rules the strictest timeout may be another rule's than the one
-- in rule; `policy explain` named it, `approvals show` could not. Empty
-- for requests made before this migration, by older binaries (which name
-- the columns they write), and for requests with no policy rule of their
-- own (policy changes).
ALTER TABLE requests ADD COLUMN timeout_rule TEXT NOT NULL DEFAULT '';
