package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/storetest"
)

// testLinks is a ChainAudit build function for the store's tests: one link
// per event (its record names the event's seq) and then calls links that
// are not events, chained on head. The hashes only need to be distinct:
// the store checks that links follow each other, package audit hashes.
func testLinks(calls int) func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error) {
	return func(head store.AuditHead, src []store.AuditSource) ([]store.AuditEntry, error) {
		var out []store.AuditEntry
		prev, seq := head.Hash, head.Seq
		add := func(record string) {
			seq++
			e := store.AuditEntry{Seq: seq, At: t0, Record: []byte(record), PrevHash: prev, Hash: fmt.Sprintf("h%d", seq)}
			out = append(out, e)
			prev = e.Hash
		}
		for _, s := range src {
			add(fmt.Sprintf(`{"event_seq":%d,"seq":%d}`, s.Event.Seq, seq+1))
		}
		for range calls {
			add(fmt.Sprintf(`{"seq":%d,"type":"allowed"}`, seq+1))
		}
		return out, nil
	}
}

// chainedEvents returns the event seqs the chain's links name, in chain
// order, after checking that the links follow each other.
func chainedEvents(t *testing.T, db *DB) []int64 {
	t.Helper()
	links, err := db.AuditLog(t.Context(), store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []int64
		prev string
	)
	for i, l := range links {
		if l.Seq != int64(i+1) || l.PrevHash != prev {
			t.Fatalf("link %d: seq %d, previous %q; want seq %d after %q", i, l.Seq, l.PrevHash, i+1, prev)
		}
		prev = l.Hash
		var ev int64
		if n, _ := fmt.Sscanf(string(l.Record), `{"event_seq":%d,`, &ev); n == 1 {
			out = append(out, ev)
		}
	}
	return out
}

// TestChainAuditNeverSkipsALateCommit: the chain follows the change feed,
// so an event whose transaction took a lower seq but commits after one with
// a higher seq is chained too, once (a cursor over seqs moved past it for
// good: the chain missed it, and verify could not tell).
func TestChainAuditNeverSkipsALateCommit(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	if err := db.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	chain := func() {
		t.Helper()
		if _, _, err := db.ChainAudit(ctx, 0, 0, testLinks(0)); err != nil {
			t.Fatal(err)
		}
	}
	chain() // the creation
	commitLate(t, db, testID(1), chain)
	all, err := db.Events(ctx, 0, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("Events = %v, %v; want the creation, late and early", all, err)
	}
	// The late event shows in the feed once every older transaction in
	// the cluster ended; chain until it is there (or give up).
	for deadline := time.Now().Add(30 * time.Second); len(chainedEvents(t, db)) < len(all) && time.Now().Before(deadline); {
		chain()
	}
	got := chainedEvents(t, db)
	slices.Sort(got)
	want := []int64{all[0].Seq, all[1].Seq, all[2].Seq}
	if !slices.Equal(got, want) {
		t.Errorf("chained events %v, want %v: each event once, the late commit too", got, want)
	}
	if pos, _, err := db.FeedPosition(ctx, store.FeedConsumerAudit); err != nil {
		t.Errorf("FeedPosition = %v", err)
	} else if end, err := db.FeedEnd(ctx); err != nil || pos != end {
		t.Errorf("audit position %v, feed end %v (%v): want the end", pos, end, err)
	}
}

// TestChainAuditBuildsAgainWhenTheChainMoved: ChainAudit builds outside its
// write transaction, so another chainer can get in between; the append
// then notices that the head or the feed position moved, writes nothing
// and builds again on what is there now. Without the checks the event is
// chained twice (position) or links are refused or forked (head).
func TestChainAuditBuildsAgainWhenTheChainMoved(t *testing.T) {
	tests := []struct {
		name string
		// other is what the chainer that gets in between appends for the
		// events waiting: a link each (head and position move) or none
		// (only the position moves).
		other func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)
		// wantLinks after both: the event (when the other linked it) and
		// the call.
		wantLinks int
	}{
		{"head and position moved", testLinks(0), 2},
		{"only the position moved", func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error) { return nil, nil }, 1},
	}
	for _, b := range backends {
		for _, tc := range tests {
			t.Run(b.driver+"/"+tc.name, func(t *testing.T) {
				db := openTest(t, b.fresh(t))
				ctx := t.Context()
				if err := db.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
					t.Fatal(err)
				}
				// On Postgres the event enters the feed only once older
				// transactions on the shared server have ended: the first
				// build was given none (a package running beside it).
				storetest.FeedShowsAll(t, db)
				var builds []int // events each build was given
				n, _, err := db.ChainAudit(ctx, 0, 1, func(head store.AuditHead, src []store.AuditSource) ([]store.AuditEntry, error) {
					builds = append(builds, len(src))
					if len(builds) == 1 {
						if _, _, err := db.ChainAudit(context.WithoutCancel(ctx), 0, 0, tc.other); err != nil {
							return nil, err
						}
					}
					return testLinks(1)(head, src)
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(builds, []int{1, 0}) || n != 1 {
					t.Errorf("builds were given %v events and appended %d links; want [1 0] (built again without the event the other chained) and 1", builds, n)
				}
				links, err := db.AuditLog(ctx, store.AuditFilter{})
				if err != nil || len(links) != tc.wantLinks {
					t.Fatalf("AuditLog = %d links, %v; want %d", len(links), err, tc.wantLinks)
				}
				if evs := chainedEvents(t, db); len(evs) != tc.wantLinks-1 {
					t.Errorf("chained events %v; want %d", evs, tc.wantLinks-1)
				}
				head, err := db.AuditChain(ctx)
				if err != nil || head.Seq != int64(tc.wantLinks) || head.Hash != links[len(links)-1].Hash {
					t.Errorf("AuditChain = %+v, %v; want the last link", head, err)
				}
			})
		}
	}
}

// TestChainAuditAppendsLargeBatches: an append of many links (events and
// calls) is written in INSERTs of up to auditRowsPerInsert links each, of
// power-of-two sizes; every link lands once, in order, and the head is the
// last. 300 events and 7 calls cross the statement sizes 128, 128, 32, 16,
// 2 and 1.
func TestChainAuditAppendsLargeBatches(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			var want []int64
			for i := range 300 {
				if err := db.CreateRequest(ctx, pendingRequest(testID(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			storetest.FeedShowsAll(t, db) // else ChainAudit may see more of the feed than Feed just did
			evs, _, err := db.Feed(ctx, store.Cursor{}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				want = append(want, ev.Seq)
			}
			n, more, err := db.ChainAudit(ctx, 1000, 7, testLinks(7))
			if err != nil {
				t.Fatal(err)
			}
			if n != len(want)+7 || more {
				t.Fatalf("ChainAudit appended %d links, more %v; want %d, false", n, more, len(want)+7)
			}
			if got := chainedEvents(t, db); !slices.Equal(got, want) {
				t.Errorf("chained %d events %v…; want the feed's %d in order", len(got), got[:min(len(got), 5)], len(want))
			}
			links, err := db.AuditLog(ctx, store.AuditFilter{Limit: 1000})
			if err != nil || len(links) != n {
				t.Fatalf("AuditLog = %d links, %v; want %d", len(links), err, n)
			}
			head, err := db.AuditChain(ctx)
			if err != nil || head.Seq != int64(n) || head.Hash != links[n-1].Hash {
				t.Errorf("AuditChain = %+v, %v; want the last link", head, err)
			}
		})
	}
}

// BenchmarkChainAudit appends 256 links per op (the audit trail's default
// batch: calls decided without an approval, no events to read), as the
// trail does while it catches up with a burst of admissions. cpu-ms/op is
// this process's CPU (user+sys) per op; on Postgres the server's work is
// in the time per op, not in cpu-ms/op.
func BenchmarkChainAudit(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.driver, func(b *testing.B) {
			db := openTest(b, bk.fresh(b))
			build := testLinks(256)
			cpu0 := cpuTime(b, 0)
			for b.Loop() {
				if n, _, err := db.ChainAudit(b.Context(), 256, 256, build); err != nil || n != 256 {
					b.Fatalf("appended %d: %v", n, err)
				}
			}
			b.ReportMetric(float64(cpuTime(b, 0)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
