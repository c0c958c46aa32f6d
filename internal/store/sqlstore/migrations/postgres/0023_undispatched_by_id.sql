-- requests_undispatched (0013) holds the consumed requests without a
-- dispatch outcome, keyed by (state, dispatch_outcome): the two columns
-- its condition fixes, the same in every entry. RecordOutcome's UPDATE
-- (outcome.go: WHERE id = $1 AND state = 'consumed' AND dispatch_outcome
-- = '') repeats that condition, and with statistics gathered while the
-- held requests were pending (as during an approve-all) the planner read
-- the row through this index, estimated at one entry, and filtered on id:
-- every outcome read every request in dispatch and the dead versions of
-- those already finished (0.15-0.7 ms per outcome with 300-500 in
-- flight, measured in psql). Keyed by id, a read through it finds the one
-- row; the sweeper's Due query and NextDue, which read every entry, and
-- the index's size (only the requests in dispatch) are as before
-- (docs/performance.md, branch pghot38). SQLite's 0023 keeps its index:
-- its planner reads a request by its primary key.
DROP INDEX requests_undispatched;
CREATE INDEX requests_undispatched ON requests (id)
	WHERE state = 'consumed' AND dispatch_outcome = '';
