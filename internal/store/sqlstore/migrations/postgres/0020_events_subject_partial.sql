-- Every event has exactly one subject (events_one_subject): a request's
-- events have no session_id and no grant_id, yet events_session and
-- events_grant took an entry for each of them, a NULL key (≈ 8 of the 20
-- index entries an approval's four events write). Their only readers look
-- up one session or one grant (retention's NOT EXISTS, the foreign keys'
-- checks when a session or a grant row goes), with =, which implies IS NOT
-- NULL: the planner uses these partial indexes for them (the tests EXPLAIN
-- both), and request events no longer go into them (docs/performance.md,
-- branch pgapprove33). SQLite's 0020 is the same change.
DROP INDEX events_session;
CREATE INDEX events_session ON events (session_id, seq) WHERE session_id IS NOT NULL;
DROP INDEX events_grant;
CREATE INDEX events_grant ON events (grant_id, seq) WHERE grant_id IS NOT NULL;
