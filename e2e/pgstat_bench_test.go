package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStatStart readies the counting of approve-all's statements when
// TOOLGATE_BENCH_PGSTAT names a file (startPGCluster then preloads
// pg_stat_statements): it creates the extension in dsn's database and
// resets its counters and returns the number of committed transactions
// so far; 0 and nothing done otherwise.
func pgStatStart(tb testing.TB, dsn string) int64 {
	tb.Helper()
	if os.Getenv("TOOLGATE_BENCH_PGSTAT") == "" {
		return 0
	}
	ctx := tb.Context()
	if err := pgExec(ctx, dsn, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		tb.Fatalf("pg_stat_statements: %v", err)
	}
	if err := pgExec(ctx, dsn, `SELECT pg_stat_statements_reset()`); err != nil {
		tb.Fatalf("pg_stat_statements_reset: %v", err)
	}
	pgTables0 = pgTables(tb, dsn)
	return pgCommits(tb, dsn)
}

// pgTableCounts are one table's row counters (pg_stat_user_tables) and,
// under the key "", the cluster's WAL position in bytes.
type pgTableCounts struct{ ins, upd, hot, del int64 }

// pgTables0 holds pgTables as pgStatStart read it (benchmarks run one at
// a time).
var pgTables0 map[string]pgTableCounts

// pgTables reads every table's inserts, updates, heap-only updates and
// deletes so far, and the WAL position (under "": ins).
func pgTables(tb testing.TB, dsn string) map[string]pgTableCounts {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(tb.Context())) }()
	if _, err := conn.Exec(tb.Context(), `SELECT pg_stat_clear_snapshot()`); err != nil {
		tb.Fatal(err)
	}
	rows, err := conn.Query(tb.Context(), `SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
		UNION ALL SELECT '', (pg_current_wal_lsn() - '0/0')::bigint, 0, 0, 0`)
	if err != nil {
		tb.Fatal(err)
	}
	m := map[string]pgTableCounts{}
	for rows.Next() {
		var (
			name string
			c    pgTableCounts
		)
		if err := rows.Scan(&name, &c.ins, &c.upd, &c.hot, &c.del); err != nil {
			tb.Fatal(err)
		}
		m[name] = c
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return m
}

// pgTablesSave appends to the file TOOLGATE_BENCH_PGSTAT names, per
// approval (n), each table's inserts, updates and heap-only updates since
// pgStatStart and the cluster's WAL bytes; it reports the requests
// table's HOT ratio and the WAL per approval (the WAL of everything in
// the cluster from pgStatStart to now). It waits 11 s first: idle
// backends flush their table counters late.
func pgTablesSave(b *testing.B, dsn string, n int) {
	b.Helper()
	file := os.Getenv("TOOLGATE_BENCH_PGSTAT")
	if file == "" || pgTables0 == nil {
		return
	}
	// a backend that went idle flushes its counters within
	// PGSTAT_IDLE_INTERVAL (10 s)
	time.Sleep(11 * time.Second)
	now := pgTables(b, dsn)
	var out strings.Builder
	fmt.Fprintf(&out, "# per approval (N = %d), since approve-all began: table, inserts, updates, heap-only updates, deletes\n", n)
	names := make([]string, 0, len(now))
	for name := range now {
		names = append(names, name)
	}
	sort.Strings(names)
	per := func(d int64) float64 { return float64(d) / float64(n) }
	for _, name := range names {
		c, c0 := now[name], pgTables0[name]
		if name == "" {
			continue
		}
		if c == c0 {
			continue
		}
		fmt.Fprintf(&out, "%s\t%.3f\t%.3f\t%.3f\t%.3f\n", name, per(c.ins-c0.ins), per(c.upd-c0.upd), per(c.hot-c0.hot), per(c.del-c0.del))
	}
	wal := per(now[""].ins - pgTables0[""].ins)
	fmt.Fprintf(&out, "# cluster WAL bytes/approval %.1f\n", wal)
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(out.String()); err != nil {
		b.Fatal(err)
	}
	r, r0 := now["requests"], pgTables0["requests"]
	if upd := r.upd - r0.upd; upd > 0 {
		b.ReportMetric(float64(r.hot-r0.hot)/float64(upd), "pg-requests-hot-ratio")
	}
	b.ReportMetric(wal, "pg-cluster-wal-B/approval")
}

// pgCommits returns the cluster's committed transactions
// (pg_stat_database.xact_commit, all databases).
func pgCommits(tb testing.TB, dsn string) int64 {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(tb.Context())) }()
	if _, err := conn.Exec(tb.Context(), `SELECT pg_stat_clear_snapshot()`); err != nil {
		tb.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(tb.Context(), `SELECT sum(xact_commit)::bigint FROM pg_stat_database`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// pgStatSave writes to the file TOOLGATE_BENCH_PGSTAT names the
// statements counted since pgStatStart, per approval (n approvals), most
// called first, and the committed transactions per approval since
// commits0; it reports statements/approval and commits/approval.
func pgStatSave(b *testing.B, dsn string, commits0 int64, n int) {
	b.Helper()
	file := os.Getenv("TOOLGATE_BENCH_PGSTAT")
	if file == "" {
		return
	}
	commits := pgCommits(b, dsn) - commits0
	conn, err := pgx.Connect(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(b.Context())) }()
	rows, err := conn.Query(b.Context(), `SELECT calls, total_exec_time, rows, toplevel, wal_bytes::bigint, query FROM pg_stat_statements
		WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC, total_exec_time DESC`)
	if err != nil {
		b.Fatal(err)
	}
	var (
		out           strings.Builder
		all, top, wal float64
	)
	fmt.Fprintf(&out, "# per approval (N = %d): calls, exec ms, rows, top-level, WAL bytes, query\n", n)
	for rows.Next() {
		var (
			calls, nrows int64
			ms           float64
			toplevel     bool
			walBytes     int64
			q            string
		)
		if err := rows.Scan(&calls, &ms, &nrows, &toplevel, &walBytes, &q); err != nil {
			b.Fatal(err)
		}
		per := float64(calls) / float64(n)
		all += per
		if toplevel {
			top += per
			wal += float64(walBytes) / float64(n)
		}
		fmt.Fprintf(&out, "%.3f\t%.4f\t%.3f\t%v\t%.1f\t%s\n", per, ms/float64(n), float64(nrows)/float64(n), toplevel, float64(walBytes)/float64(n), strings.Join(strings.Fields(q), " "))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(&out, "# statements/approval %.3f (top-level %.3f), commits/approval %.3f, statements' WAL bytes/approval %.1f\n", all, top, float64(commits)/float64(n), wal)
	if err := os.WriteFile(file, []byte(out.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(top, "pg-statements/approval")
	b.ReportMetric(float64(commits)/float64(n), "pg-commits/approval")
	b.ReportMetric(wal, "pg-wal-B/approval")
}

// pgAutovacuums returns how many times autovacuum has vacuumed or
// analysed a table of dsn's database so far (pg_stat_user_tables), for
// BenchmarkHeldCalls' approve-autovacuums: whether the cluster's
// maintenance after the burst ran during approve-all.
func pgAutovacuums(tb testing.TB, dsn string) int64 {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(tb.Context())) }()
	var n int64
	if err := conn.QueryRow(tb.Context(), `SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint FROM pg_stat_user_tables`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
