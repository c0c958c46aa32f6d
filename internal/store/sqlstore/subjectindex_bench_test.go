package sqlstore

import (
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// BenchmarkApprovalEventIndexes approves requests on Postgres,
// approvalIndexWorkers at a time (create, approve and consume, outcome:
// four events each), with events_session and events_grant as migration 20
// made them ("partial": WHERE … IS NOT NULL) and as before it ("full"), in
// blocks of approvalIndexBlock approvals that alternate between the two
// (ABBA, then BAAB) on one database, and reports each's median per
// approval over the blocks: cpu-us (this process and every backend of its
// pools, /proc, 10 ms ticks) and the two indexes' growth in bytes.
// -benchtime 1x; b.N multiplies the rounds.
func BenchmarkApprovalEventIndexes(b *testing.B) {
	cfg := postgresConfig(pgtest.Fresh(b))
	cfg.MaxConns = approvalIndexWorkers
	db := openTest(b, cfg)
	ctx := b.Context()
	exec := func(q string) {
		b.Helper()
		if _, err := db.sql.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	schema := map[string]func(){
		"partial": func() {
			exec(`DROP INDEX events_session`)
			exec(`CREATE INDEX events_session ON events (session_id, seq) WHERE session_id IS NOT NULL`)
			exec(`DROP INDEX events_grant`)
			exec(`CREATE INDEX events_grant ON events (grant_id, seq) WHERE grant_id IS NOT NULL`)
		},
		"full": func() {
			exec(`DROP INDEX events_session`)
			exec(`CREATE INDEX events_session ON events (session_id, seq)`)
			exec(`DROP INDEX events_grant`)
			exec(`CREATE INDEX events_grant ON events (grant_id, seq)`)
		},
	}
	indexBytes := func() int64 {
		var n int64
		if err := db.sql.QueryRowContext(ctx, `SELECT pg_relation_size('events_session') + pg_relation_size('events_grant')`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	backends := func() []int {
		rows, err := db.sql.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
		pids, err := collect(rows, err, func(rows *sql.Rows) (int, error) {
			var pid int
			return pid, rows.Scan(&pid)
		})
		if err != nil {
			b.Fatal(err)
		}
		return pids
	}
	cpu := func(pids []int) time.Duration {
		self := cpuTime(b, 0)
		d := self
		for _, pid := range pids {
			d += cpuTime(b, pid) - self
		}
		return d
	}
	var next atomic.Int64
	approve := func() {
		r := pendingRequest(testID(int(next.Add(1))))
		if err := db.CreateRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
		at := t0.Add(time.Minute)
		if _, err := db.UpdateRequest(ctx, r.ID, "gw-1", func(r *approval.Request) error {
			if err := r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", at); err != nil {
				return err
			}
			return r.Consume(r.Binding(), "", at)
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := db.RecordOutcome(ctx, r.ID, approval.OutcomeOK, nil, "gw-1"); err != nil {
			b.Fatal(err)
		}
	}
	block := func() {
		var wg sync.WaitGroup
		for range approvalIndexWorkers {
			wg.Go(func() {
				for range approvalIndexBlock / approvalIndexWorkers {
					approve()
				}
			})
		}
		wg.Wait()
	}
	block() // the pools' connections open, the plans are cached
	got := map[string][]float64{}
	grew := map[string][]float64{}
	for b.Loop() {
		for round := range 4 {
			order := []string{"full", "partial"}
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range append(order, order[1], order[0]) {
				schema[s]()
				block()
				pids, size := backends(), indexBytes()
				c0 := cpu(pids)
				block()
				got[s] = append(got[s], float64(cpu(pids)-c0)/float64(time.Microsecond)/approvalIndexBlock)
				grew[s] = append(grew[s], float64(indexBytes()-size)/approvalIndexBlock)
			}
		}
	}
	for s, v := range got {
		b.ReportMetric(median(v), s+"-cpu-us/approval")
		b.ReportMetric(median(grew[s]), s+"-index-B/approval")
		b.Logf("%s: cpu µs per approval by block %.0f; index bytes %.1f", s, v, grew[s])
	}
}

// approvalIndexBlock is the approvals in one block of
// BenchmarkApprovalEventIndexes, approvalIndexWorkers at a time.
const approvalIndexBlock, approvalIndexWorkers = 400, 8

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
