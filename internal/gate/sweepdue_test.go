package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/telemetry"
)

// hangOnce is a store whose call op, once armed, answers only when its
// context ends, once: a connection to a store that stopped answering for
// a moment.
type hangOnce struct {
	store.Store
	op    string
	armed atomic.Bool
}

func (h *hangOnce) hang(ctx context.Context, op string) bool {
	if op != h.op || !h.armed.CompareAndSwap(true, false) {
		return false
	}
	<-ctx.Done()
	return true
}

func (h *hangOnce) PruneLedger(ctx context.Context, now time.Time) (int, error) {
	if h.hang(ctx, "PruneLedger") {
		return 0, ctx.Err()
	}
	return h.Store.PruneLedger(ctx, now)
}

func (h *hangOnce) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	if h.hang(ctx, "Due") {
		return nil, ctx.Err()
	}
	return h.Store.Due(ctx, now, limit)
}

func (h *hangOnce) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if h.hang(ctx, "UpdateRequest") {
		return approval.Request{}, ctx.Err()
	}
	return h.Store.UpdateRequest(ctx, id, actor, fn)
}

// TestSweepOutlivesAHungStoreCall (attack23): the sweep bounded only its
// count of pending requests; the ledger's prune, the list of due requests
// and each expiry used the sweep's own context, so one store call that
// hung stopped every sweep after it. Each is one bounded attempt now:
// after a hung call the next sweep expires the request that is due.
func TestSweepOutlivesAHungStoreCall(t *testing.T) {
	for _, op := range []string{"PruneLedger", "Due", "UpdateRequest"} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := sqlitetest.Open(t)
				hs := &hangOnce{Store: db, op: op}
				pol := &swappable{}
				pol.p.Store(retryPolicy(10 * time.Second))
				g := New(hs, pol, &Options{RetryWait: time.Nanosecond})
				a := g.Admit(t.Context(), writeCall("/sweep-hang"))
				if a.Allowed || a.ApprovalID == "" {
					t.Fatalf("%+v, want a pending approval", a)
				}
				time.Sleep(11 * time.Second) // the request is due
				hs.armed.Store(true)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan struct{})
				go func() {
					defer close(done)
					g.sweep(ctx)
					g.sweep(ctx)
				}()
				time.Sleep(2*attemptTimeout + time.Second)
				synctest.Wait()
				select {
				case <-done:
				default:
					t.Fatalf("%v after %s stopped answering once, the two sweeps have not returned", 2*attemptTimeout+time.Second, op)
				}
				if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.State != approval.StateExpired {
					t.Errorf("after a hung %s and another sweep the due request is %s (err %v), want expired", op, r.State, err)
				}
			})
		})
	}
}

// countingDue is the SQLite store counting the sweeper's lists of due
// requests.
type countingDue struct {
	*sqlstore.DB
	dues atomic.Int64
}

func (c *countingDue) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	c.dues.Add(1)
	return c.DB.Due(ctx, now, limit)
}

// TestIdleSweeperLeavesTheStoreAlone (issue 13, idle pages): with
// Options.Watched the sweeper does not ask the store while nothing can be
// due, and still expires on time a request this gate created, one
// another instance created (reported by the store's watch, as serve
// wires it), and a held call's timeout; the pending gauge follows.
func TestIdleSweeperLeavesTheStoreAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		cs := &countingDue{DB: db}
		reg := prometheus.NewRegistry()
		pol := &swappable{}
		pol.p.Store(retryPolicy(30 * time.Second))
		g := New(cs, pol, &Options{Watched: true, RetryWait: time.Nanosecond, Instance: "a", Metrics: telemetry.NewMetrics(reg)})
		other := New(db, pol, &Options{RetryWait: time.Nanosecond, Instance: "b"}) // shares the store; its sweeper does not run
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		wg.Go(func() { _ = g.Run(ctx) })
		wg.Go(func() { watchFor(ctx, db, g) })
		idle := func(when string) {
			t.Helper()
			before := cs.dues.Load()
			time.Sleep(time.Minute)
			synctest.Wait()
			if n := cs.dues.Load() - before; n > 2 {
				t.Errorf("%s: the sweeper listed due requests %d times in a minute with nothing due, want at most 2", when, n)
			}
		}
		idle("after start")
		pending := func(want float64) {
			t.Helper()
			if n, ok := pendingGauge(t, reg); !ok || n != want {
				t.Errorf("pending gauge %v (present %v), want %v", n, ok, want)
			}
		}
		expiresOnTime := func(who string, a Admission, after time.Duration) {
			t.Helper()
			if a.Allowed || a.ApprovalID == "" {
				t.Fatalf("%s: %+v, want a pending approval", who, a)
			}
			time.Sleep(after - time.Second)
			synctest.Wait()
			if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.State != approval.StatePending {
				t.Errorf("%s: a second before its expiry the request is %s (err %v), want pending", who, r.State, err)
			}
			pending(1)
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.State != approval.StateExpired {
				t.Errorf("%s: a second after its expiry the request is %s (err %v), want expired", who, r.State, err)
			}
			pending(0)
		}
		expiresOnTime("this gate's request", g.Admit(ctx, writeCall("/own")), 30*time.Second)
		idle("after an expiry")
		expiresOnTime("another instance's request", other.Admit(ctx, writeCall("/other")), 30*time.Second)
		idle("after another instance's request expired")

		pol.p.Store(testPolicy(20 * time.Second)) // hold mode
		held := admitAsync(ctx, g, writeCall("/held"))
		time.Sleep(19 * time.Second)
		synctest.Wait()
		select {
		case a := <-held:
			t.Fatalf("the held call was answered a second before its timeout: %+v", a)
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case a := <-held:
			if a.Allowed {
				t.Errorf("the held call was allowed at its timeout: %+v", a)
			}
		default:
			t.Errorf("the held call was not answered a second after its timeout")
		}
		idle("after the held call's timeout")
	})
}

// TestWatchedSweeperExpiresOnPostgres: on Postgres, with the watch as
// serve wires it, a watched gate whose sweeper sleeps while nothing is due
// still expires a request it created, one another instance created (its
// only news is the watch's NOTIFY), and a held call's timeout.
func TestWatchedSweeperExpiresOnPostgres(t *testing.T) {
	dsn := pgtest.Fresh(t)
	open := func() *sqlstore.DB {
		db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: dsn, Poll: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	pol := &swappable{}
	pol.p.Store(retryPolicy(time.Second))
	g := New(dbA, pol, &Options{Watched: true, RetryWait: time.Nanosecond, SweepInterval: 100 * time.Millisecond, Instance: "a"})
	if g.due.timer == nil {
		t.Fatal("a watched gate on Postgres sweeps every interval: the store does not tell its due times")
	}
	other := New(dbB, pol, &Options{RetryWait: time.Nanosecond, Instance: "b"}) // its sweeper does not run
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = g.Run(ctx) })
	wg.Go(func() { watchFor(ctx, dbA, g) })
	expires := func(who string, a Admission) {
		t.Helper()
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("%s: %+v, want a pending approval", who, a)
		}
		deadline := time.Now().Add(30 * time.Second) // a hang guard
		for {
			r, err := dbA.GetRequest(t.Context(), a.ApprovalID)
			if err == nil && r.State == approval.StateExpired {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: 30 s after a 1 s expiry the request is %s (err %v), want expired", who, r.State, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	expires("this gate's request", g.Admit(ctx, writeCall("/own")))
	expires("another instance's request", other.Admit(ctx, writeCall("/other")))
	pol.p.Store(testPolicy(time.Second)) // hold mode
	select {
	case a := <-admitAsync(ctx, g, writeCall("/held")):
		if a.Allowed {
			t.Errorf("the held call was allowed at its timeout: %+v", a)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the held call was not answered 30 s after its 1 s timeout")
	}
}

// watchFor wakes g on the changes db's watch reports, as serve wires it
// (openStore).
func watchFor(ctx context.Context, db *sqlstore.DB, g *Gate) {
	db.WatchLog(ctx, func(id approval.ID) {
		if id == "" {
			g.WakeAll()
		} else {
			g.Wake(id)
		}
	}, g.Changed)
}
