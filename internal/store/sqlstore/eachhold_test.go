package sqlstore

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestEachRequestHoldsNoAdminConnectionWhileFnRuns (attack28): the admin
// API's pool has AdminConns (2) connections, and GET /v1/approvals writes
// to the client from fn (the page streamed, held27). A client that stops
// reading a large page blocks fn for up to the list's 30 s write deadline;
// with the read open meanwhile, two such clients (any role that may list)
// held the whole pool, and every approver's show, list and inbox page
// waited behind them, again every 30 s. fn must run with no connection of
// the pool in use; the page is still the one a single read returns (pageOf), across
// the reads it now takes.
func TestEachRequestHoldsNoAdminConnectionWhileFnRuns(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			var all []approval.ID
			for i := range 230 {
				r := pendingRequest(testID(i + 1))
				if 100 <= i && i < 130 { // 600 KB: batches cut by their bytes (eachBatchBytes)
					r.Arguments = []byte(`{"pad":"` + strings.Repeat("p", 20<<10) + `"}`)
				}
				if err := db.CreateRequest(ctx, r); err != nil {
					t.Fatal(err)
				}
				all = append(all, testID(i+1))
			}
			for _, f := range []store.Filter{{}, {Limit: 1000}, {Limit: 64}, {Limit: 65}, {Limit: 200, Cursor: listPositionOf(t, db, testID(20)).String()},
				{Limit: 229}, {Limit: 230}, {Limit: 231}, {Limit: 150, Descending: true}, {Limit: 1000, Descending: true, Cursor: listPositionOf(t, db, testID(100)).String()}} {
				wantIDs, wantLast := pageOf(t, all, f)
				var got []approval.ID
				busy := 0
				next, err := db.EachRequest(ctx, f, func(r approval.Request) error {
					if n := db.asql.Stats().InUse; n > 0 {
						busy = max(busy, n)
					}
					got = append(got, r.ID)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if busy > 0 {
					t.Errorf("limit %d cursor %q descending %v: fn ran with %d of the admin pool's %d connections in use (the page's read open while the client is written to)", f.Limit, f.Cursor, f.Descending, busy, AdminConns)
				}
				var gotLast approval.ID
				if next != "" {
					p, err := store.ParseListCursor(next)
					if err != nil {
						t.Fatal(err)
					}
					gotLast = p.ID
				}
				if !slices.Equal(got, wantIDs) || gotLast != wantLast {
					t.Errorf("limit %d cursor %q descending %v: EachRequest %d ids (%v…) next after %q; want %d (%v…) next after %q", f.Limit, f.Cursor, f.Descending, len(got), got[:min(3, len(got))], gotLast, len(wantIDs), wantIDs[:min(3, len(wantIDs))], wantLast)
				}
			}
		})
	}
}

// pageOf is the page of f among ids (every request of the store, in list
// order, all matching f but for its cursor and limit) and the id its next
// cursor is after ("" for none), as one read returns it.
func pageOf(t *testing.T, ids []approval.ID, f store.Filter) (page []approval.ID, last approval.ID) {
	t.Helper()
	ids = slices.Clone(ids)
	if f.Descending {
		slices.Reverse(ids)
	}
	if f.Cursor != "" {
		p, err := store.ParseListCursor(f.Cursor)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[slices.Index(ids, p.ID)+1:]
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if len(ids) > limit {
		return ids[:limit], ids[limit-1]
	}
	return ids, ""
}

// listPositionOf returns the list position of request id (nothing open).
func listPositionOf(t *testing.T, db *DB, id approval.ID) store.ListPosition {
	t.Helper()
	var order string
	if err := db.sql.QueryRowContext(t.Context(), db.d.rebind(`SELECT CAST(list_order AS TEXT) FROM requests WHERE id = ?`), string(id)).Scan(&order); err != nil {
		t.Fatal(err)
	}
	o, err := strconv.ParseUint(order, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return store.ListPosition{Order: o, ID: id}
}
