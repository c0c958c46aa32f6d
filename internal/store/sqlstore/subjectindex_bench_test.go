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
	exec := func(q string) {
		b.Helper()
		if _, err := db.sql.ExecContext(b.Context(), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	benchApprovalBlocks(b, db, [2]string{"full", "partial"}, map[string]func(){
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
	}, `SELECT pg_relation_size('events_session') + pg_relation_size('events_grant')`)
}

// BenchmarkApprovalPrincipalIndex is BenchmarkApprovalEventIndexes for
// migration 21 on Postgres: "both" with requests_requested_by_state as
// before it (beside requests_pending), "one" without it; the index bytes
// are those of every index of requests. It also reports, per approval
// over the whole run, the rows requests took (n_tup_ins), its updates
// (n_tup_upd) and how many of these were HOT (n_tup_hot_upd: no new index
// entries); every other row version enters every full index.
func BenchmarkApprovalPrincipalIndex(b *testing.B) {
	cfg := postgresConfig(pgtest.Fresh(b))
	cfg.MaxConns = approvalIndexWorkers
	db := openTest(b, cfg)
	exec := func(q string) {
		b.Helper()
		if _, err := db.sql.ExecContext(b.Context(), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	var approvals atomic.Int64
	benchApprovalBlocks(b, db, [2]string{"both", "one"}, map[string]func(){
		"both": func() {
			exec(`CREATE INDEX IF NOT EXISTS requests_requested_by_state ON requests (requested_by, state)`)
		},
		"one": func() { exec(`DROP INDEX IF EXISTS requests_requested_by_state`) },
	}, `SELECT pg_indexes_size('requests')`, &approvals)
	var ins, upd, hot int64
	// Each backend sends its table counters when it goes idle, at most
	// once a second: wait for the last approval's.
	for range 100 {
		if err := db.sql.QueryRowContext(b.Context(), `SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd
			FROM pg_stat_user_tables WHERE relname = 'requests'`).Scan(&ins, &upd, &hot); err != nil {
			b.Fatal(err)
		}
		if ins == approvals.Load() && upd >= 2*ins {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := float64(approvals.Load())
	b.ReportMetric(float64(ins)/n, "requests-inserts/approval")
	b.ReportMetric(float64(upd)/n, "requests-updates/approval")
	b.ReportMetric(float64(hot)/n, "requests-hot-updates/approval")
}

// benchApprovalBlocks approves requests on db, approvalIndexWorkers at a
// time (create, approve and consume, outcome), in blocks of
// approvalIndexBlock approvals with schema[kinds[0]] or schema[kinds[1]]
// applied before each (ABBA, then BAAB; four rounds per b.N), and reports
// each kind's median per approval: CPU (this process and every backend of
// db's pools, µs) and the growth of size (a query of one bigint: bytes).
// counted, when given, counts the approvals.
func benchApprovalBlocks(b *testing.B, db *DB, kinds [2]string, schema map[string]func(), size string, counted ...*atomic.Int64) {
	b.Helper()
	ctx := b.Context()
	indexBytes := func() int64 {
		var n int64
		if err := db.sql.QueryRowContext(ctx, size).Scan(&n); err != nil {
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
		if err := db.RecordOutcome(ctx, r.ID, approval.OutcomeOK, nil, "gw-1"); err != nil {
			b.Fatal(err)
		}
		for _, c := range counted {
			c.Add(1)
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
			order := []string{kinds[0], kinds[1]}
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
