package sqlstore

import (
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestListOfAStateReadsItsPage (list28): on SQLite the list of one state
// in id order (the inbox's pending page, newest first; a state filter of
// GET /v1/approvals) reads its rows in order through an index and stops
// at its page, instead of sorting every row of that state before the
// first one (USE TEMP B-TREE FOR ORDER BY: with 10,000 pending ≈ 40 ms a
// page view, and every pending row copied into the sorter).
func TestListOfAStateReadsItsPage(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "toolgate.db")))
	for _, f := range []store.Filter{
		{State: approval.StatePending, Descending: true, Limit: 100},
		{State: approval.StatePending, Descending: true, Limit: 100, Cursor: testIDText(50)},
		{State: approval.StatePending, Limit: 1000},
		{State: approval.StateDenied, Descending: true, Limit: 50},
	} {
		q, args, _ := listQuery(f)
		if p := queryPlan(t, db, q, args...); strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "requests_state_id") {
			t.Errorf("filter %+v: the plan is %q, want the rows of the state read in id order (requests_state_id), not sorted", f, p)
		}
	}
}

func testIDText(n int) string { return string(testID(n)) }
