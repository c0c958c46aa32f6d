package sqlstore

import (
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestListOfAStateReadsItsPage (list28, page41): on SQLite the list of one state
// in list order (the inbox's pending page, newest first; a state filter of
// GET /v1/approvals) reads its rows in order through an index and stops
// at its page, instead of sorting every row of that state before the
// first one (USE TEMP B-TREE FOR ORDER BY: with 10,000 pending ≈ 40 ms a
// page view, and every pending row copied into the sorter).
func TestListOfAStateReadsItsPage(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "toolgate.db")))
	for _, c := range []struct {
		f   store.Filter
		pos store.ListPosition
	}{
		{store.Filter{State: approval.StatePending, Descending: true, Limit: 100}, store.ListPosition{}},
		{store.Filter{State: approval.StatePending, Descending: true, Limit: 100}, store.ListPosition{Order: 7, ID: testID(50)}},
		{store.Filter{State: approval.StatePending, Limit: 1000}, store.ListPosition{}},
		{store.Filter{State: approval.StatePending, Limit: 1000}, store.ListPosition{Order: 7, ID: testID(50)}},
		{store.Filter{State: approval.StateDenied, Descending: true, Limit: 50}, store.ListPosition{}},
	} {
		q, args := listQuery(requestList(c.f), c.pos, c.f.Limit, false)
		if p := queryPlan(t, db, q, args...); strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "requests_state_list_order") {
			t.Errorf("filter %+v after %+v: the plan is %q, want the rows of the state read in list order (requests_state_list_order), not sorted", c.f, c.pos, p)
		}
	}
	q, args := listQuery(requestList(store.Filter{Limit: 100}), store.ListPosition{Order: 7, ID: testID(50)}, 100, false)
	if p := queryPlan(t, db, q, args...); strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "requests_list_order") {
		t.Errorf("the list of every state: the plan is %q, want the rows read in list order (requests_list_order), not sorted", p)
	}
}
