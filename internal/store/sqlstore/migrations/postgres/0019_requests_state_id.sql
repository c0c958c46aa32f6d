-- A list of one state in id order (the inbox: pending, newest first, 100
-- a page; GET /v1/approvals?state=): an index that gives the rows of a
-- state in id order, so that a page reads its rows instead of sorting
-- every row of the state (docs/performance.md, branch list28). SQLite's
-- 0019 is the same index.
CREATE INDEX requests_state_id ON requests (state, id);
