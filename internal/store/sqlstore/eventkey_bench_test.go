//go:build linux

package sqlstore

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// backendsCPU is the user+sys CPU time so far of the Postgres backends
// connected to db's database (pg_stat_activity; /proc/PID/stat, so the
// cluster must run on this machine).
func backendsCPU(b *testing.B, db *DB) time.Duration {
	b.Helper()
	rows, err := db.asql.QueryContext(b.Context(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var d time.Duration
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			b.Fatalf("read backend %d's CPU: %v (the cluster must run on this machine)", pid, err)
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		for _, s := range f[11:13] { // utime, stime
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			d += time.Duration(v) * 10 * time.Millisecond
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkEventRequestKey measures what migration 22 (events.request_id
// without its foreign key) saves: the CPU of whole request lives on
// Postgres (create, approve, consume, record the outcome: five events,
// so five key checks with the key), this process's and the database's
// backends', on two databases of this schema, one with the key added
// back. Blocks of 400 lives by 8 workers run A B B A per round (A without
// the key), 4 rounds; it logs each block and the medians in µs per life.
// TOOLGATE_TEST_POSTGRES must name a cluster on this machine. Run it
// alone: go test -run '^$' -bench EventRequestKey -benchtime 1x -v.
func BenchmarkEventRequestKey(b *testing.B) {
	const (
		block   = 400
		workers = 8
		rounds  = 4
	)
	without := openTest(b, postgresConfig(pgtest.Fresh(b)))
	with := openTest(b, postgresConfig(pgtest.Fresh(b)))
	if _, err := with.asql.ExecContext(b.Context(), `ALTER TABLE events ADD CONSTRAINT events_request_id_fkey FOREIGN KEY (request_id) REFERENCES requests (id)`); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	lives := func(db *DB, n int) {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range n / workers {
					id := testID(int(next.Add(1)))
					if err := db.CreateRequest(b.Context(), pendingRequest(id)); err != nil {
						b.Error(err)
						return
					}
					if _, err := db.UpdateRequest(b.Context(), id, "alice", approveFn); err != nil {
						b.Error(err)
						return
					}
					if _, err := db.UpdateRequest(b.Context(), id, "toolgate", func(r *approval.Request) error {
						return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
					}); err != nil {
						b.Error(err)
						return
					}
					if err := db.RecordOutcome(b.Context(), id, approval.OutcomeOK, nil, "toolgate"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	measure := func(db *DB) float64 {
		p0, d0 := cpuTime(b, 0), backendsCPU(b, db)
		lives(db, block)
		p1, d1 := cpuTime(b, 0), backendsCPU(b, db)
		return float64((p1-p0)+(d1-d0)) / float64(time.Microsecond) / block
	}
	lives(without, block) // warm both: connections, caches
	lives(with, block)
	b.ResetTimer()
	for range b.N {
		var a, k []float64
		for r := range rounds {
			order := []*DB{without, with, with, without}
			var line []string
			for _, db := range order {
				us := measure(db)
				if db == without {
					a = append(a, us)
				} else {
					k = append(k, us)
				}
				line = append(line, fmt.Sprintf("%.0f", us))
			}
			b.Logf("round %d (without, with, with, without): %s µs per life", r+1, strings.Join(line, " "))
		}
		ma, mk := median(a), median(k)
		b.Logf("median µs per life: without the key %.0f (%.0f–%.0f), with it %.0f (%.0f–%.0f); without ÷ with %.3f",
			ma, slices.Min(a), slices.Max(a), mk, slices.Min(k), slices.Max(k), ma/mk)
		b.ReportMetric(ma, "without-µs/life")
		b.ReportMetric(mk, "with-µs/life")
	}
}
