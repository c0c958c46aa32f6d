package sqlstore

import (
	"context"
	"database/sql"
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

// A pagedList is a list paged by list order as these tests use it: the
// approvals list (pending requests) or the grants list (grants42).
type pagedList struct {
	name string
	// create makes one row on in at at (its id of that time, n in its
	// random bits), committed, and returns its id; w, the writer's number,
	// may pick one of the ways the store creates one.
	create func(ctx context.Context, in instance, at time.Time, n, w int) (string, error)
	// insert inserts one row of in's clock, made at at, in tx, which the
	// caller commits, and returns its id.
	insert func(t *testing.T, in instance, tx *sql.Tx, at time.Time, n int) string
	// page reads one page of limit rows after cursor: its ids, the next
	// cursor.
	page func(t *testing.T, db *DB, limit int, cursor string) ([]string, string)
}

var requestsList = pagedList{
	name: "requests",
	create: func(ctx context.Context, in instance, at time.Time, n, w int) (string, error) {
		r := pendingRequest(idAt(at, n))
		r.CreatedAt, r.ExpiresAt = at, at.Add(time.Hour)
		var caps []store.Cap
		if w%4 >= 2 { // on Postgres the pipelined creation (pgCreate)
			caps = []store.Cap{{Scope: store.CapPrincipal, Key: r.RequestedBy, Limit: 1 << 20}, {Scope: store.CapTotal, Limit: 1 << 20}}
		}
		return string(r.ID), in.db.CreateRequest(ctx, r, caps...)
	},
	insert: func(t *testing.T, _ instance, tx *sql.Tx, at time.Time, n int) string {
		t.Helper()
		r := pendingRequest(idAt(at, n))
		w, err := encodeRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(t.Context(), dollarPlaceholders(`INSERT INTO requests (`+requestColumns+`) VALUES (`+placeholders(numRequestColumns)+`)`), w.args()...); err != nil {
			t.Fatal(err)
		}
		return string(r.ID)
	},
	page: func(t *testing.T, db *DB, limit int, cursor string) ([]string, string) {
		t.Helper()
		ids, next := pageOne(t, db, store.Filter{State: approval.StatePending, Limit: limit, Cursor: cursor})
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = string(id)
		}
		return out, next
	},
}

var pagedLists = []pagedList{requestsList, grantsList}

// make makes one row of l on in at in's clock (n in its id's random bits)
// and returns its id.
func (l pagedList) make(t *testing.T, in instance, n int) string {
	t.Helper()
	id, err := l.create(t.Context(), in, in.now(), n, 0)
	if err != nil {
		t.Fatalf("create %s %d = %v", l.name, n, err)
	}
	return id
}

// TestPagingSeesALaggingInstance (page41; grants42 for the grants): two
// instances on one store, the second's clock a minute behind. An approver
// pages the pending requests oldest first, one a page; while it does,
// the lagging instance creates a request, whose UUIDv7 id sorts before
// every id already shown. Paging by id never showed it: the approver
// followed next_cursor to "" and missed a pending request created before
// its last page. The same with grants: an admin paging through them to
// revoke them never revoked a grant the lagging instance made.
func TestPagingSeesALaggingInstance(t *testing.T) {
	for _, l := range pagedLists {
		for _, b := range backends {
			t.Run(l.name+"/"+b.driver, func(t *testing.T) {
				cfg := b.fresh(t)
				now := time.Now().UTC()
				good := instance{openTest(t, cfg), func() time.Time { return now }}
				lagging := instance{openTest(t, cfg), func() time.Time { return now.Add(-time.Minute) }}
				want := map[string]bool{l.make(t, good, 1): true, l.make(t, good, 2): true}

				seen := map[string]bool{}
				cursor := ""
				for page := 0; ; page++ {
					ids, next := l.page(t, good.db, 1, cursor)
					for _, id := range ids {
						seen[id] = true
					}
					if page == 0 {
						want[l.make(t, lagging, 3)] = true
					}
					if next == "" {
						break
					}
					if page > 10 {
						t.Fatal("more than 10 pages of 3 rows")
					}
					cursor = next
				}
				for id := range want {
					if !seen[id] {
						t.Errorf("%s %s (created before the last page was read) was never listed", l.name, id)
					}
				}
			})
		}
	}
}

// TestPagingSeesALateCommit (page41; grants42 for the grants; Postgres):
// a creation that inserted its row before another creation but commits
// after it, and after the page that showed the other was read. Any order
// fixed at insert (an id, a sequence) puts the late row before a cursor
// already handed out; the list must still show it before it says "".
func TestPagingSeesALateCommit(t *testing.T) {
	for _, l := range pagedLists {
		t.Run(l.name, func(t *testing.T) {
			db := openTest(t, postgresConfig(pgtest.Fresh(t)))
			ctx := t.Context()
			now := time.Now().UTC()
			in := instance{db, func() time.Time { return now }}
			first := l.make(t, in, 1)

			late, err := db.sql.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = late.Rollback() }()
			lateID := l.insert(t, in, late, now.Add(time.Millisecond), 2)
			in.now = func() time.Time { return now.Add(2 * time.Millisecond) }
			second := l.make(t, in, 3) // commits first
			third := l.make(t, in, 4)  // so the page of the second is not the last

			seen := map[string]bool{}
			cursor := ""
			for page := 0; ; page++ {
				ids, next := l.page(t, db, 1, cursor)
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
					t.Fatal("more than 10 pages of 4 rows")
				}
				cursor = next
			}
			for _, id := range []string{first, lateID, second, third} {
				if !seen[id] {
					t.Errorf("%s %s (committed before the last page was read) was never listed", l.name, id)
				}
			}
		})
	}
}

// TestPagingWhileCreating (page41; grants42 for the grants): writers on
// two instances with skewed clocks create requests (grants) while readers
// page through the pending ones (the grants), two a page, oldest first,
// again and again. Every pass from the first page to "" must show every
// row whose creation had returned before the pass read its last page, and
// no row twice.
func TestPagingWhileCreating(t *testing.T) {
	for _, l := range pagedLists {
		for _, b := range backends {
			t.Run(l.name+"/"+b.driver, func(t *testing.T) {
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
					doneAt  = map[string]int64{} // a creation's place in done
					wg      sync.WaitGroup
					writing = make(chan struct{})
				)
				for w := range writers {
					wg.Go(func() {
						in := ins[w%2]
						for i := range perWriter {
							at := in.now().Add(time.Duration(i) * time.Millisecond)
							id, err := l.create(context.Background(), in, at, w*perWriter+i, w)
							if err != nil {
								t.Errorf("create %s = %v", l.name, err)
								return
							}
							n := done.Add(1)
							mu.Lock()
							doneAt[id] = n
							mu.Unlock()
						}
					})
				}
				go func() { wg.Wait(); close(writing) }()

				type pass struct {
					seen    map[string]int
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
						p := pass{seen: map[string]int{}, reader: r}
						cursor := ""
						for {
							p.before = done.Load()
							ids, next := l.page(t, in.db, 2, cursor)
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
							cursor = next
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
					var missed []string
					for id, at := range doneAt {
						if at <= p.before && p.seen[id] == 0 {
							missed = append(missed, id)
						}
					}
					if len(missed) > 0 {
						t.Errorf("pass %d (reader %d, %d pages) missed %d %s created before its last page, e.g. %s", i, p.reader, p.pageCnt, len(missed), l.name, missed[0])
					}
				}
				if last := passes[len(passes)-1]; len(last.seen) != writers*perWriter {
					t.Errorf("the last pass listed %d %s, want %d", len(last.seen), l.name, writers*perWriter)
				}
				t.Logf("%d passes", len(passes))
			})
		}
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
