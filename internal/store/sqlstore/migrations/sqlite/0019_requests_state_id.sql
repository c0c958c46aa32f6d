-- A list of one state in id order (the inbox: pending, newest first, 100
-- a page; GET /v1/approvals?state=) read every request of that state
-- through requests_state_expires and sorted them whole, arguments and all,
-- before its first row: with 10,000 pending ≈ 40 ms and a sorter of every
-- pending row per page view (docs/performance.md, branch list28). This
-- index gives the rows of a state in id order: a page reads its rows.
CREATE INDEX requests_state_id ON requests (state, id);
