package gate

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to create databases

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// BenchmarkHoldAndApprove holds N calls from 100 principals in one gate
// over a real store, then approves them all, and reports the time to hold them all
// (hold-s), the approve-all rate (approvals/s: from the first review until
// every call was admitted and its outcome recorded), the CPU of this
// process over that time per approval (approve-cpu-ms: the gate, the
// reviewers and, for SQLite, the database; steadier than approvals/s on a
// shared machine), and the store calls per approval over that time:
// request reads (reads/approval: GetRequest) and request writes
// (writes/approval: UpdateRequest, UpdateRequestWithChain, RecordDispatch;
// each one transaction); and checks that every call was admitted exactly
// once. On Postgres it also reports the round trips to the server per
// approval (round-trips/approval, counted by a proxy: turnCounter). It measures the gate and the store
// without MCP or HTTP; e2e's BenchmarkHeldCalls measures the real binary.
// Run with -benchtime 1x; Postgres runs when TOOLGATE_TEST_POSTGRES is set.
//
//	go test -run '^$' -bench HoldAndApprove -benchtime 1x ./internal/gate/
func BenchmarkHoldAndApprove(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sqlite/N=%d", n), func(b *testing.B) {
			db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(b.TempDir(), "t.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			benchHoldAndApprove(b, db, n, nil)
		})
		if dsn := os.Getenv("TOOLGATE_TEST_POSTGRES"); dsn != "" {
			b.Run(fmt.Sprintf("postgres/N=%d", n), func(b *testing.B) {
				turns, via := countTurns(b, freshPostgres(b, dsn))
				db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: via})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = db.Close() }()
				benchHoldAndApprove(b, db, n, turns)
			})
		}
	}
}

// turns, when not nil, counts the round trips to the Postgres server.
func benchHoldAndApprove(b *testing.B, db *sqlstore.DB, n int, turns *turnCounter) {
	b.Helper()
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	fs := newFaulty(db) // never down here: it counts the store calls
	g := New(fs, pol, &Options{MaxPendingPerPrincipal: n, MaxPending: n})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runWG sync.WaitGroup
	runWG.Go(func() { _ = g.Run(ctx) })
	runWG.Go(func() {
		db.Watch(ctx, func(id approval.ID) {
			if id == "" {
				g.WakeAll()
			} else {
				g.Wake(id)
			}
		})
	})
	defer runWG.Wait()
	defer cancel()
	for b.Loop() {
		start := time.Now()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			allowed int
		)
		for i := range n {
			wg.Go(func() {
				c := writeCall(fmt.Sprint("/bench/", i))
				c.Principal.ID = fmt.Sprint("agent-", i%100)
				a := g.Admit(ctx, c)
				if a.Allowed {
					a.Finish(ctx, approval.OutcomeOK)
				}
				mu.Lock()
				defer mu.Unlock()
				if a.Allowed {
					allowed++
				} else {
					b.Errorf("call %d refused: %s", i, a.Message)
				}
			})
		}
		for {
			k, err := db.CountPending(ctx, "")
			if err != nil {
				b.Fatal(err)
			}
			if k == n {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		hold := time.Since(start)
		var ids []approval.ID
		for f := (store.Filter{State: approval.StatePending, Limit: 1000}); ; {
			rs, next, err := db.ListRequests(ctx, f)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				ids = append(ids, r.ID)
			}
			if next == "" {
				break
			}
			f.Cursor = next
		}
		fs.reset()
		if turns != nil {
			turns.turns.Store(0)
		}
		cpu0 := processCPU(b)
		start = time.Now()
		work := make(chan approval.ID)
		var rwg sync.WaitGroup
		for range 16 {
			rwg.Go(func() {
				for id := range work {
					if _, err := g.Review(ctx, id, alice, approval.VerdictApprove, "", ""); err != nil {
						b.Errorf("approve %s: %v", id, err)
					}
				}
			})
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		rwg.Wait()
		wg.Wait()
		took := time.Since(start)
		cpu := processCPU(b) - cpu0
		if allowed != n {
			b.Fatalf("%d of %d calls admitted", allowed, n)
		}
		b.ReportMetric(hold.Seconds(), "hold-s")
		b.ReportMetric(float64(n)/took.Seconds(), "approvals/s")
		b.ReportMetric(cpu.Seconds()*1000/float64(n), "approve-cpu-ms")
		b.ReportMetric(float64(fs.count("GetRequest"))/float64(n), "reads/approval")
		writes := fs.count("UpdateRequest") + fs.count("UpdateRequestWithChain") + fs.count("RecordDispatch") + fs.count("RecordOutcome")
		b.ReportMetric(float64(writes)/float64(n), "writes/approval")
		if turns != nil {
			b.ReportMetric(float64(turns.turns.Load())/float64(n), "round-trips/approval")
		}
	}
}

// freshPostgres creates a new database on the server of dsn for one
// benchmark and returns its DSN; it is dropped at the end.
func freshPostgres(b *testing.B, dsn string) string {
	b.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	name := fmt.Sprintf("tg_bench_%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(b.Context(), "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if a, err := sql.Open("pgx", dsn); err == nil {
			_, _ = a.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
			_ = a.Close()
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// BenchmarkIdleHeldCalls holds N calls on SQLite and counts the store
// calls the gate makes while nothing happens, over 10 s (two lease
// renewals at the default lease): reads-per-s (request reads),
// writes-per-s (request writes) and renewals-per-s (RenewLeases
// statements' batches). The goal (issue 9, defect 6) is that they do not
// grow with N. The SQLite watch also reads PRAGMA data_version 4 times a
// second on its own connection, whatever N is.
//
//	go test -run '^$' -bench IdleHeldCalls -benchtime 1x ./internal/gate/
func BenchmarkIdleHeldCalls(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(b.TempDir(), "t.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			fs := newFaulty(db)
			pol := &swappable{}
			pol.p.Store(testPolicy(time.Hour))
			g := New(fs, pol, &Options{MaxPendingPerPrincipal: n, MaxPending: n})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			wg.Go(func() { _ = g.Run(ctx) })
			wg.Go(func() {
				db.Watch(ctx, func(id approval.ID) {
					if id == "" {
						g.WakeAll()
					} else {
						g.Wake(id)
					}
				})
			})
			for i := range n {
				wg.Go(func() { g.Admit(ctx, writeCall(fmt.Sprint("/idle/", i))) })
			}
			for {
				k, err := db.CountPending(ctx, "")
				if err != nil {
					b.Fatal(err)
				}
				if k == n {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(time.Second) // let the creations' wake-ups settle
			for b.Loop() {
				fs.reset()
				const window = 10 * time.Second
				time.Sleep(window) // idle is what is measured
				b.ReportMetric(float64(fs.count("GetRequest"))/window.Seconds(), "reads-per-s")
				b.ReportMetric(float64(fs.count("UpdateRequest")+fs.count("UpdateRequestWithChain"))/window.Seconds(), "writes-per-s")
				b.ReportMetric(float64(fs.count("RenewLeases"))/window.Seconds(), "renewals-per-s")
			}
		})
	}
}
