package sqlstore

import (
	"slices"
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
			for _, f := range []store.Filter{{}, {Limit: 1000}, {Limit: 64}, {Limit: 65}, {Limit: 200, Cursor: string(testID(20))},
				{Limit: 229}, {Limit: 230}, {Limit: 231}, {Limit: 150, Descending: true}, {Limit: 1000, Descending: true, Cursor: string(testID(100))}} {
				wantIDs, wantNext := pageOf(all, f)
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
				if !slices.Equal(got, wantIDs) || next != wantNext {
					t.Errorf("limit %d cursor %q descending %v: EachRequest %d ids (%v…) next %q; want %d (%v…) next %q", f.Limit, f.Cursor, f.Descending, len(got), got[:min(3, len(got))], next, len(wantIDs), wantIDs[:min(3, len(wantIDs))], wantNext)
				}
			}
		})
	}
}

// pageOf is the page of f among ids (every request of the store, in id
// order, all matching f but for its cursor and limit) and its next
// cursor, as one read by id returns it.
func pageOf(ids []approval.ID, f store.Filter) (page []approval.ID, next string) {
	ids = slices.Clone(ids)
	if f.Descending {
		slices.Reverse(ids)
	}
	if f.Cursor != "" {
		i := slices.IndexFunc(ids, func(id approval.ID) bool {
			return (!f.Descending && string(id) > f.Cursor) || (f.Descending && string(id) < f.Cursor)
		})
		if i < 0 {
			i = len(ids)
		}
		ids = ids[i:]
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if len(ids) > limit {
		return ids[:limit], string(ids[limit-1])
	}
	return ids, ""
}
