package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

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
	return pgCommits(tb, dsn)
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
