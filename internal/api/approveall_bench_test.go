package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
)

// BenchmarkApproveAllocs holds N calls in one gate over a real store and
// approves them all through the admin API's handler, as approve-all does
// (POST /v1/approvals/{id}/approve with {"reason":""}, 32 at a time), and
// reports what one approval's whole path allocates in this process:
// B/approval and allocs/approval (runtime.MemStats TotalAlloc and Mallocs
// over approve-all, divided by N). The path is the REST decode and
// answer, the store's decision, the store watch's wake of the held call,
// its consume, the caller's outcome (the upstream's dispatch itself is a
// no-op here) and the audit chain's flush of the events, with the gate's
// and the trail's background work meanwhile, wired as serve wires them
// (cmd/toolgate: WatchEvents, Settled, the trail as Recorder). The
// figures include this benchmark's own request and recorder per approval
// (≈ 1 KB: the request and its recorder), the same in every tree. It also reports approvals/s (wall
// time; not steady on a shared machine). Each call must be admitted
// exactly once and every approve answered 200, or it fails. GC is what
// allocations cost approve-all (docs/performance.md). Postgres runs when
// TOOLGATE_TEST_POSTGRES is set. TOOLGATE_BENCH_ALLOCS=DIR samples every
// allocation and writes the profiles before and after approve-all there
// (saveAllocs); the B/approval of such a run includes the profiler's own.
// TOOLGATE_BENCH_CPU=DIR writes a CPU profile of each round's approve-all
// there (startCPU): where an approval's CPU goes, without the admission.
//
//	go test -run '^$' -bench ApproveAllocs -benchtime 1x ./internal/api/
func BenchmarkApproveAllocs(b *testing.B) {
	const n = 2000
	b.Run(fmt.Sprintf("sqlite/N=%d", n), func(b *testing.B) {
		db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(b.TempDir(), "t.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		benchApproveAllocs(b, db, n)
	})
	b.Run(fmt.Sprintf("postgres/N=%d", n), func(b *testing.B) {
		db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: pgtest.Fresh(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		benchApproveAllocs(b, db, n)
	})
}

func benchApproveAllocs(b *testing.B, db *sqlstore.DB, n int) {
	b.Helper()
	if os.Getenv("TOOLGATE_BENCH_ALLOCS") != "" {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 // every allocation, for the profiles
	}
	pol := &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Hour, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
	}
	trail := audit.New(db, &audit.Options{Poll: time.Hour, Settled: db.Settled, QueueSize: n})
	g := gate.New(db, pol, &gate.Options{Watched: true, Settled: db.Settled, Recorder: trail,
		MaxPendingPerPrincipal: n, MaxPending: n})
	h := api.New(g, authenticate, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var runWG sync.WaitGroup
	defer runWG.Wait()
	defer cancel()
	runWG.Go(func() { _ = g.Run(ctx) })
	runWG.Go(func() { _ = trail.Run(ctx) })
	runWG.Go(func() {
		db.WatchEvents(ctx, sqlstore.WatchFuncs{
			Changed: func(id approval.ID) {
				if id == "" {
					g.WakeAll()
					trail.Wake()
				} else {
					g.Wake(id)
				}
			},
			Appended: func() { g.Changed(); trail.Wake() },
			Touched:  g.Touched,
		})
	})
	for b.Loop() {
		var (
			held    sync.WaitGroup
			allowed atomic.Int64
		)
		for i := range n {
			held.Go(func() {
				c := gate.Call{Principal: approval.Principal{ID: fmt.Sprint("agent-", i%100), Kind: "agent"},
					Server: "fs", Tool: "write_file", ToolDigest: "sha256:d1",
					Arguments: fmt.Appendf(nil, `{"path":"/bench/%d","content":"x"}`, i)}
				a := g.Admit(ctx, c)
				if !a.Allowed {
					b.Errorf("call %d refused: %s", i, a.Message)
					return
				}
				a.Finish(ctx, approval.OutcomeOK)
				allowed.Add(1)
			})
		}
		ids := waitHeld(ctx, b, db, n)
		if err := trail.Flush(ctx); err != nil { // the creations' events chained before
			b.Fatal(err)
		}
		saveAllocs(b, "before")
		stopCPU := startCPU(b)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		work := make(chan approval.ID)
		var rwg sync.WaitGroup
		for range 32 {
			rwg.Go(func() {
				for id := range work {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/approvals/"+string(id)+"/approve", strings.NewReader(`{"reason":""}`))
					if err != nil {
						b.Error(err)
						continue
					}
					req.Header.Set("Authorization", "Bearer bob-tok")
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Errorf("approve %s: %d %s", id, rec.Code, rec.Body)
					}
				}
			})
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		rwg.Wait()
		held.Wait()
		if err := trail.Flush(ctx); err != nil { // the approvals' events chained
			b.Fatal(err)
		}
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		stopCPU()
		saveAllocs(b, "after")
		if k := allowed.Load(); k != int64(n) {
			b.Fatalf("%d of %d calls admitted", k, n)
		}
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n), "B/approval")
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/approval")
		b.ReportMetric(float64(n)/took.Seconds(), "approvals/s")
	}
}

// saveAllocs writes the allocation profile to
// $TOOLGATE_BENCH_ALLOCS/<benchmark>-<when>.pprof when that is set: what
// approve-all allocated is go tool pprof -sample_index=alloc_space -base
// …-before.pprof …-after.pprof.
func saveAllocs(b *testing.B, when string) {
	b.Helper()
	dir := os.Getenv("TOOLGATE_BENCH_ALLOCS")
	if dir == "" {
		return
	}
	runtime.GC() // the profile is as of the last collection
	f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+"-"+when+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// startCPU starts a CPU profile of approve-all when TOOLGATE_BENCH_CPU
// names a directory: $TOOLGATE_BENCH_CPU/<benchmark>-<round>.pprof, one a
// round (go tool pprof merges several). It returns the function that
// stops it.
func startCPU(b *testing.B) func() {
	b.Helper()
	dir := os.Getenv("TOOLGATE_BENCH_CPU")
	if dir == "" {
		return func() {}
	}
	f, err := os.CreateTemp(dir, strings.ReplaceAll(b.Name(), "/", "_")+"-*.pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// waitHeld waits until n requests are pending in db and returns their ids.
func waitHeld(ctx context.Context, b *testing.B, db *sqlstore.DB, n int) []approval.ID {
	b.Helper()
	for {
		k, err := db.CountPending(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		if k == n {
			break
		}
		time.Sleep(10 * time.Millisecond) // setup, not measured
	}
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
			return ids
		}
		f.Cursor = next
	}
}
