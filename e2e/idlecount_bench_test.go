package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// idleCounts is what BenchmarkHeldCalls counts over its idle window that
// does not depend on the machine's load (unlike a share of a core):
// toolgate's context switches (all its threads, voluntary and not: its
// wakeups) and, on Postgres, the cluster's committed transactions, rows
// returned, fetched and written, shared buffer hits and WAL bytes
// (pg_stat_database, all databases, and pg_current_wal_lsn).
//
// pg_stat_database lags: a backend flushes its counters at most once a
// second and, when idle, within 10 s, so over a 31 s window the counts
// are right to a few seconds' worth; TOOLGATE_BENCH_PGSTAT's
// per-statement file (pg_stat_statements, counted as they run) is exact.
type idleCounts struct {
	cswitch                                      int64
	commits, returned, fetched, written, blksHit int64
	wal                                          int64 // bytes since the cluster started
}

// readIdleCounts reads pid's context switches and, when dsn is not empty,
// the cluster's counters; one transaction of its own on the cluster.
func readIdleCounts(tb testing.TB, pid int, dsn string) idleCounts {
	tb.Helper()
	var c idleCounts
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, name := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if v, ok := strings.CutPrefix(line, name); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					c.cswitch += n
				}
			}
		}
	}
	if dsn == "" {
		return c
	}
	ctx := tb.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := conn.QueryRow(ctx, `SELECT sum(xact_commit)::bigint, sum(tup_returned)::bigint, sum(tup_fetched)::bigint,
		sum(tup_inserted + tup_updated + tup_deleted)::bigint, sum(blks_hit)::bigint,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_database`).Scan(
		&c.commits, &c.returned, &c.fetched, &c.written, &c.blksHit, &c.wal); err != nil {
		tb.Fatal(err)
	}
	return c
}

// report reports b−a per second of d as idle-toolgate-cswitch/s and, on
// Postgres, idle-pg-commits/s, idle-pg-tup-returned/s,
// idle-pg-tup-fetched/s, idle-pg-tup-written/s, idle-pg-blks-hit/s and
// idle-pg-wal-B/s.
func (a idleCounts) report(b *testing.B, later idleCounts, d time.Duration, pg bool) {
	b.Helper()
	per := func(v int64) float64 { return float64(v) / d.Seconds() }
	b.ReportMetric(per(later.cswitch-a.cswitch), "idle-toolgate-cswitch/s")
	if !pg {
		return
	}
	b.ReportMetric(per(later.commits-a.commits), "idle-pg-commits/s")
	b.ReportMetric(per(later.returned-a.returned), "idle-pg-tup-returned/s")
	b.ReportMetric(per(later.fetched-a.fetched), "idle-pg-tup-fetched/s")
	b.ReportMetric(per(later.written-a.written), "idle-pg-tup-written/s")
	b.ReportMetric(per(later.blksHit-a.blksHit), "idle-pg-blks-hit/s")
	b.ReportMetric(per(later.wal-a.wal), "idle-pg-wal-B/s")
}

// pgStatIdleStart resets pg_stat_statements before the idle window when
// TOOLGATE_BENCH_PGSTAT names a file (the cluster preloads it then).
func pgStatIdleStart(tb testing.TB, dsn string) {
	tb.Helper()
	if dsn == "" || os.Getenv("TOOLGATE_BENCH_PGSTAT") == "" {
		return
	}
	ctx := tb.Context()
	if err := pgExec(ctx, dsn, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		tb.Fatalf("pg_stat_statements: %v", err)
	}
	if err := pgExec(ctx, dsn, `SELECT pg_stat_statements_reset()`); err != nil {
		tb.Fatalf("pg_stat_statements_reset: %v", err)
	}
}

// pgStatIdleSave writes to <TOOLGATE_BENCH_PGSTAT>.idle the statements the
// idle window ran (d long) per second, most called first: calls, exec ms,
// rows, shared blocks hit, WAL bytes, query; and reports their sum as
// idle-pg-statements/s and idle-pg-stmt-rows/s.
func pgStatIdleSave(b *testing.B, dsn string, d time.Duration) {
	b.Helper()
	file := os.Getenv("TOOLGATE_BENCH_PGSTAT")
	if dsn == "" || file == "" {
		return
	}
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, rows, shared_blks_hit + shared_blks_read, wal_bytes::bigint, toplevel, query
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_stat_database%'
		ORDER BY calls DESC, rows DESC`)
	if err != nil {
		b.Fatal(err)
	}
	var (
		out         strings.Builder
		calls, nrow float64
	)
	sec := d.Seconds()
	fmt.Fprintf(&out, "# idle window %v, per second: calls, exec ms, rows, blocks, WAL B, top-level, query\n", d)
	for rows.Next() {
		var (
			n, r, blks, wal int64
			ms              float64
			top             bool
			q               string
		)
		if err := rows.Scan(&n, &ms, &r, &blks, &wal, &top, &q); err != nil {
			b.Fatal(err)
		}
		if top {
			calls += float64(n) / sec
			nrow += float64(r) / sec
		}
		fmt.Fprintf(&out, "%.3f\t%.3f\t%.1f\t%.1f\t%.0f\t%v\t%s\n", float64(n)/sec, ms/sec, float64(r)/sec,
			float64(blks)/sec, float64(wal)/sec, top, strings.Join(strings.Fields(q), " "))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(&out, "# top-level statements/s %.3f, rows/s %.1f\n", calls, nrow)
	if err := os.WriteFile(file+".idle", []byte(out.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(calls, "idle-pg-statements/s")
	b.ReportMetric(nrow, "idle-pg-stmt-rows/s")
}
