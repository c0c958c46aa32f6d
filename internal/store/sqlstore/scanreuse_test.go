package sqlstore

import (
	"testing"

	"toolgate/internal/store"
	"toolgate/internal/store/storetest"
)

// TestFeedAndAuditReadsScanThroughOneScanner: the change feed (Feed,
// which the audit trail and the gate's watchers read) and the audit
// trail's read of the events' requests (auditRequests) scan their rows
// into fields a scanner keeps, through destinations made once per read
// (eventScanner, auditRequestScanner), not into an event or a request row
// and its destinations made on the heap for each row (≈ 2 KB per approval
// on Postgres: pgalloc43). Measured as what one more row costs: the
// allocations of a read of 2n rows less those of a read of n, per row,
// which cancels the statement's own allocations and leaves the driver's
// run-to-run spread of one or two allocations at a hundredth of one per
// row. A row still costs its strings and the driver's work for it, so the
// bounds sit between the per-row counts on both stores before (812d89d0:
// feed 15.0, requests 22.05-22.10) and after (11.0, 21.05-21.11): two
// allocations a row from the feed's, half of one from the requests'.
func TestFeedAndAuditReadsScanThroughOneScanner(t *testing.T) {
	const n = 100
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			for i := range 2 * n {
				if err := db.CreateRequest(ctx, pendingRequest(testID(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			storetest.FeedShowsAll(t, db) // Postgres: once older transactions on the server ended
			evs, _, err := db.Feed(ctx, store.Cursor{}, 2*n)
			if err != nil || len(evs) != 2*n {
				t.Fatalf("Feed = %d events, %v; want %d", len(evs), err, 2*n)
			}
			perRow := func(read func(k int)) float64 {
				return (testing.AllocsPerRun(5, func() { read(2 * n) }) - testing.AllocsPerRun(5, func() { read(n) })) / n
			}
			feed := perRow(func(k int) {
				if got, _, err := db.Feed(ctx, store.Cursor{}, k); err != nil || len(got) != k {
					t.Fatalf("Feed(%d) = %d events, %v", k, len(got), err)
				}
			})
			reqs := perRow(func(k int) {
				if got, err := auditRequests(ctx, db, evs[:k]); err != nil || len(got) != k {
					t.Fatalf("auditRequests(%d events) = %d requests, %v", k, len(got), err)
				}
			})
			t.Logf("allocations per row: feed %.2f, the events' requests %.2f", feed, reqs)
			if feed > 13 {
				t.Errorf("the feed allocates %.2f times per event, want at most 13: an event or its destinations made per row", feed)
			}
			if reqs > 21.5 {
				t.Errorf("the events' requests allocate %.2f times per request, want at most 21.5: a row made per request", reqs)
			}
		})
	}
}
