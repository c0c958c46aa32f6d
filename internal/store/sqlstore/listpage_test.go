package sqlstore

import (
	"context"
	"encoding/binary"
	"slices"

	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// idAt returns a UUIDv7 request id made at clock time at (as
// approval.NewID makes one from the creating instance's clock), with n in
// its random bits so ids made in one millisecond differ.
func idAt(at time.Time, n int) approval.ID {
	var u uuid.UUID
	ms := uint64(at.UnixMilli()) //nolint:gosec // G115: a test clock after 1970
	binary.BigEndian.PutUint64(u[:8], ms<<16)
	u[6] = 0x70                                   // version 7
	u[8] = 0x80                                   // RFC 9562 variant
	binary.BigEndian.PutUint32(u[12:], uint32(n)) //nolint:gosec // G115: small test numbers
	return approval.ID(u.String())
}

// An instance is one gateway instance in these tests: a store handle of
// its own and a clock, which makes its requests' ids and times.
type instance struct {
	db  *DB
	now func() time.Time
}

func (in instance) create(t *testing.T, n int) approval.ID {
	t.Helper()
	at := in.now()
	r := pendingRequest(idAt(at, n))
	r.CreatedAt, r.ExpiresAt = at, at.Add(time.Hour)
	if err := in.db.CreateRequest(t.Context(), r); err != nil {
		t.Fatalf("CreateRequest(%s) = %v", r.ID, err)
	}
	return r.ID
}

// pageOne reads one page of f and returns its ids and next cursor.
func pageOne(t *testing.T, db *DB, f store.Filter) ([]approval.ID, string) {
	t.Helper()
	rs, next, err := db.ListRequests(t.Context(), f)
	if err != nil {
		t.Fatalf("ListRequests(%+v) = %v", f, err)
	}
	ids := make([]approval.ID, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids, next
}

// TestPagingSeesALaggingInstance (page41): two instances on one store,
// the second's clock a minute behind. An approver pages the pending
// requests oldest first, one a page; while it does, the lagging instance
// creates a request, whose UUIDv7 id sorts before every id already shown.
// Paging by id never showed it: the approver followed next_cursor to ""
// and missed a pending request created before its last page.
func TestPagingSeesALaggingInstance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			now := time.Now().UTC()
			good := instance{openTest(t, cfg), func() time.Time { return now }}
			lagging := instance{openTest(t, cfg), func() time.Time { return now.Add(-time.Minute) }}
			want := map[approval.ID]bool{good.create(t, 1): true, good.create(t, 2): true}

			f := store.Filter{State: approval.StatePending, Limit: 1}
			seen := map[approval.ID]bool{}
			for page := 0; ; page++ {
				ids, next := pageOne(t, good.db, f)
				for _, id := range ids {
					seen[id] = true
				}
				if page == 0 {
					want[lagging.create(t, 3)] = true
				}
				if next == "" {
					break
				}
				if page > 10 {
					t.Fatal("more than 10 pages of 3 requests")
				}
				f.Cursor = next
			}
			for id := range want {
				if !seen[id] {
					t.Errorf("request %s (pending, created before the last page was read) was never listed", id)
				}
			}
		})
	}
}

// TestPagingSeesALateCommit (page41, Postgres): a creation that inserted
// its row before another creation but commits after it, and after the
// page that showed the other was read. Any order fixed at insert (an id,
// a sequence) puts the late row before a cursor already handed out; the
// list must still show it before it says "".
func TestPagingSeesALateCommit(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	now := time.Now().UTC()
	in := instance{db, func() time.Time { return now }}
	first := in.create(t, 1)

	late, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback() }()
	lateReq := pendingRequest(idAt(now.Add(time.Millisecond), 2))
	w, err := encodeRequest(lateReq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.ExecContext(ctx, dollarPlaceholders(`INSERT INTO requests (`+requestColumns+`) VALUES (`+placeholders(numRequestColumns)+`)`), w.args()...); err != nil {
		t.Fatal(err)
	}
	in.now = func() time.Time { return now.Add(2 * time.Millisecond) }
	second := in.create(t, 3) // commits first
	third := in.create(t, 4)  // so the page of the second is not the last

	f := store.Filter{State: approval.StatePending, Limit: 1}
	seen := map[approval.ID]bool{}
	for page := 0; ; page++ {
		ids, next := pageOne(t, db, f)
		for _, id := range ids {
			seen[id] = true
		}
		if page == 1 {
			if err := late.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		if page > 10 {
			t.Fatal("more than 10 pages of 4 requests")
		}
		f.Cursor = next
	}
	for _, id := range []approval.ID{first, lateReq.ID, second, third} {
		if !seen[id] {
			t.Errorf("request %s (pending, committed before the last page was read) was never listed", id)
		}
	}
}

// TestPagingWhileCreating (page41): writers on two instances with skewed
// clocks create requests while readers page through the pending ones,
// two a page, oldest first, again and again. Every pass from the first
// page to "" must show every request whose creation had returned before
// the pass read its last page, and no request twice.
func TestPagingWhileCreating(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			now := time.Now().UTC()
			ins := []instance{
				{openTest(t, cfg), func() time.Time { return now }},
				{openTest(t, cfg), func() time.Time { return now.Add(-time.Minute) }},
			}
			const writers, perWriter = 4, 30
			var (
				done    atomic.Int64 // creations returned so far
				mu      sync.Mutex
				doneAt  = map[approval.ID]int64{} // a creation's place in done
				wg      sync.WaitGroup
				writing = make(chan struct{})
			)
			for w := range writers {
				wg.Go(func() {
					in := ins[w%2]
					for i := range perWriter {
						at := in.now().Add(time.Duration(i) * time.Millisecond)
						r := pendingRequest(idAt(at, w*perWriter+i))
						r.CreatedAt, r.ExpiresAt = at, at.Add(time.Hour)
						var caps []store.Cap
						if w%4 >= 2 { // on Postgres the pipelined creation (pgCreate)
							caps = []store.Cap{{Scope: store.CapPrincipal, Key: r.RequestedBy, Limit: 1 << 20}, {Scope: store.CapTotal, Limit: 1 << 20}}
						}
						if err := in.db.CreateRequest(context.Background(), r, caps...); err != nil {
							t.Errorf("CreateRequest = %v", err)
							return
						}
						n := done.Add(1)
						mu.Lock()
						doneAt[r.ID] = n
						mu.Unlock()
					}
				})
			}
			go func() { wg.Wait(); close(writing) }()

			type pass struct {
				seen    map[approval.ID]int
				before  int64 // creations returned before the last page's read
				reader  int
				pageCnt int
			}
			var passes []pass
			for finished := false; !finished; {
				select {
				case <-writing:
					finished = true
				default:
				}
				for r, in := range ins {
					p := pass{seen: map[approval.ID]int{}, reader: r}
					f := store.Filter{State: approval.StatePending, Limit: 2}
					for {
						p.before = done.Load()
						ids, next := pageOne(t, in.db, f)
						for _, id := range ids {
							p.seen[id]++
						}
						p.pageCnt++
						if next == "" {
							break
						}
						if p.pageCnt > writers*perWriter {
							t.Fatal("the cursor does not advance")
						}
						f.Cursor = next
					}
					passes = append(passes, p)
				}
			}
			if t.Failed() {
				return
			}
			for i, p := range passes {
				for id, n := range p.seen {
					if n > 1 {
						t.Errorf("pass %d (reader %d) listed %s %d times", i, p.reader, id, n)
					}
				}
				var missed []approval.ID
				for id, at := range doneAt {
					if at <= p.before && p.seen[id] == 0 {
						missed = append(missed, id)
					}
				}
				if len(missed) > 0 {
					t.Errorf("pass %d (reader %d, %d pages) missed %d requests created before its last page, e.g. %s", i, p.reader, p.pageCnt, len(missed), missed[0])
				}
			}
			if last := passes[len(passes)-1]; len(last.seen) != writers*perWriter {
				t.Errorf("the last pass listed %d requests, want %d", len(last.seen), writers*perWriter)
			}
			t.Logf("%d passes", len(passes))
		})
	}
}

// TestOldCursorStillPages (page41): requests stored before list orders
// (migration 24 gave them 0) come first, in id order, and a cursor from
// before (the id of a page's last request) goes on after that id, both
// ways: oldest first it then lists every newer request, newest first the
// older ones.
func TestOldCursorStillPages(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			for _, n := range []int{3, 1, 2, 4} {
				if err := db.CreateRequest(t.Context(), pendingRequest(testID(n))); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.sql.ExecContext(t.Context(), db.d.rebind(`UPDATE requests SET list_order = '0' WHERE id <> ?`), string(testID(4))); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				f    store.Filter
				want []approval.ID
			}{
				{store.Filter{}, []approval.ID{testID(1), testID(2), testID(3), testID(4)}},
				{store.Filter{Cursor: string(testID(1))}, []approval.ID{testID(2), testID(3), testID(4)}},
				{store.Filter{Cursor: string(testID(3)), Descending: true}, []approval.ID{testID(2), testID(1)}},
			} {
				if got, _ := pageOne(t, db, c.f); !slices.Equal(got, c.want) {
					t.Errorf("ListRequests(%+v) = %v, want %v", c.f, got, c.want)
				}
			}
		})
	}
}
