package sqlstore

import (
	"slices"
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
// the pool in use; the page is still the one ListRequests returns, across
// the reads it now takes.
func TestEachRequestHoldsNoAdminConnectionWhileFnRuns(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			for i := range 230 {
				if err := db.CreateRequest(ctx, pendingRequest(testID(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []store.Filter{{}, {Limit: 1000}, {Limit: 64}, {Limit: 65}, {Limit: 200, Cursor: string(testID(20))},
				{Limit: 229}, {Limit: 230}, {Limit: 231}, {Limit: 150, Descending: true}, {Limit: 1000, Descending: true, Cursor: string(testID(100))}} {
				want, wantNext, err := db.ListRequests(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
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
				wantIDs := make([]approval.ID, len(want))
				for i, r := range want {
					wantIDs[i] = r.ID
				}
				if !slices.Equal(got, wantIDs) || next != wantNext {
					t.Errorf("limit %d cursor %q descending %v: EachRequest %d ids (%v…) next %q; ListRequests %d (%v…) next %q", f.Limit, f.Cursor, f.Descending, len(got), got[:min(3, len(got))], next, len(wantIDs), wantIDs[:min(3, len(wantIDs))], wantNext)
				}
			}
		})
	}
}
