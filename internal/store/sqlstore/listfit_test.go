package sqlstore

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestFitOpen: how much of a page read oldest first on Postgres keeps its
// cursor within the running transactions it may carry (grants42: the
// page was refused whole before). Rows at 100, 102, 104, 106; 101, 103
// and 105 running.
func TestFitOpen(t *testing.T) {
	places := []store.ListPosition{{Order: 100, ID: "a"}, {Order: 102, ID: "b"}, {Order: 104, ID: "c"}, {Order: 106, ID: "d"}}
	running := []uint64{101, 103, 105}
	for _, c := range []struct {
		name    string
		maxOpen int
		wantK   int
		want    store.ListPosition
	}{
		{"all fit", 3, 4, store.ListPosition{Order: 106, ID: "d", Open: []uint64{101, 103, 105}}},
		{"cut before the third running", 2, 3, store.ListPosition{Order: 104, ID: "c", Open: []uint64{101, 103}}},
		{"cut to the first row", 0, 1, store.ListPosition{Order: 100, ID: "a"}},
	} {
		k, got := fitOpen(store.ListPosition{}, places, running, true, 107, c.maxOpen)
		if k != c.wantK {
			t.Errorf("%s: kept %d rows, want %d", c.name, k, c.wantK)
		}
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: cursor (-want +got)\n%s", c.name, diff)
		}
	}
	if k, _ := fitOpen(store.ListPosition{}, places, []uint64{90, 91, 92}, true, 107, 2); k != 0 {
		t.Errorf("three running below the first row, two allowed: kept %d rows, want 0 (the page fails)", k)
	}
}

// TestPagingCutsShortAboveTooManyOpen (grants42, Postgres): requests
// created by transactions that interleave with three still running ones,
// each of which has inserted a request of its own, and a cursor that may
// carry two of them. The list used to refuse the whole page (more
// running transactions below its end than a cursor holds); now it ends
// the page before the third, and once they commit, following the cursors
// lists all seven requests once. (The bound of 400 cannot be reached in
// a test: that takes 401 connections or prepared transactions, and the
// shared server allows neither, so the test lowers it: lister.maxOpen.)
func TestPagingCutsShortAboveTooManyOpen(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	now := time.Now().UTC()
	in := instance{db, func() time.Time { return now }}
	var (
		want    []string
		pending []func() error // the running transactions' commits
		ours    []uint64       // their ids
	)
	for n := range 7 {
		if n%2 == 0 {
			want = append(want, requestsList.make(t, in, n))
			continue
		}
		tx, err := db.sql.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		want = append(want, requestsList.insert(t, in, tx, now, n))
		var xid string
		if err := tx.QueryRowContext(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		x, err := strconv.ParseUint(xid, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ours = append(ours, x)
		pending = append(pending, tx.Commit)
	}

	l := db.requestLister(store.Filter{State: approval.StatePending, Limit: 10})
	l.maxOpen = 2
	var seen []string
	page := func(cursor string) string {
		t.Helper()
		next, err := l.each(ctx, cursor, 10, func(r approval.Request) error {
			seen = append(seen, string(r.ID))
			return nil
		})
		if err != nil {
			t.Fatalf("page after %q = %v", cursor, err)
		}
		return next
	}
	// Transactions of other databases on the shared server that got their
	// ids before ours are running below the page too and would cut it
	// shorter; those that start from now on get higher ids than every
	// request here. So wait (bounded) until the earlier ones ended.
	noForeignBelow(ctx, t, db, ours)
	next := page("")
	if len(seen) != 3 || next == "" {
		t.Fatalf("the first page = %v (next %q), want the 3 committed requests before the third running transaction and a cursor", seen, next)
	}
	for _, commit := range pending {
		if err := commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; next != ""; i++ {
		if i > 10 {
			t.Fatal("the cursor does not advance")
		}
		next = page(next)
	}
	slices.Sort(seen)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("listed %v, want each of %v once", seen, want)
	}
}

// noForeignBelow waits until no transaction but ours (the ids in ours)
// that got its id before this call is running on db's server. A
// transaction that gets its id later gets a higher one (ids are handed
// out in order, server-wide), so once this returns, only ours run below
// every row written before the call. Ours stay open meanwhile and hold
// back the change feed of every other test on the server, so after 10s
// (a bound, not a timing assertion) it skips t: the cut is not ours to
// predict while another test keeps a transaction open that long.
func noForeignBelow(ctx context.Context, t *testing.T, db *DB, ours []uint64) {
	t.Helper()
	var mark uint64
	if err := db.sql.QueryRowContext(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var snap string
		if err := db.sql.QueryRowContext(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
			t.Fatal(err)
		}
		running, err := runningTransactions(snap)
		if err != nil {
			t.Fatal(err)
		}
		foreign := slices.DeleteFunc(running, func(x uint64) bool { return x >= mark || slices.Contains(ours, x) })
		if len(foreign) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Skipf("transactions of other databases (%v) still run below the page after 10s: the cut is not ours to predict", foreign)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
