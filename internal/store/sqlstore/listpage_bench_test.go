package sqlstore

import (
	"os"
	"path/filepath"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// listBenchRows and listBenchPending are the requests of
// BenchmarkListPage's store: 100,000, of which 1,000 pending (the rest
// consumed), each with an order of its own where the schema has list
// orders.
const (
	listBenchRows    = 100_000
	listBenchPending = 1_000
)

// fillListBench writes the requests of BenchmarkListPage in one
// statement, then gives each its own list order (creation order) where
// the schema has them.
func fillListBench(tb testing.TB, db *DB) {
	tb.Helper()
	ctx := tb.Context()
	pg := db.Driver() == DriverPostgres
	gen := `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) SELECT n FROM g`
	hex := `printf('%012x', n)`
	if pg {
		gen, hex = `SELECT n FROM generate_series(1, ?::bigint) AS n`, `lpad(to_hex(n), 12, '0')`
	}
	q := `INSERT INTO requests (id, state, server, tool, arguments, arguments_hash, display_warnings, tool_digest, rule, mode,
		requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers, valid_for_ms, reviews,
		decided_by, reason, dispatch_outcome, held_by)
		SELECT '01900000-0000-7000-8000-' || ` + hex + `, CASE WHEN n % 100 = 0 THEN 'pending' ELSE 'consumed' END, 'pay', 'transfer',
		'{"to":"acct-9","amount":12,"memo":"a memo of a few words"}', 'sha256:00', 'null', '', 'r', 'hold',
		'desktop', '', 'acme', 1700000000000 + n, 1800000000000, 1, 'null', 600000, 'null', '', '', '', ''
		FROM (` + gen + `) AS s`
	if _, err := db.sql.ExecContext(ctx, db.d.rebind(q), listBenchRows); err != nil {
		tb.Fatal(err)
	}
	var has int
	if err := db.sql.QueryRowContext(ctx, db.d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version >= 24`)).Scan(&has); err != nil {
		tb.Fatal(err)
	}
	if has > 0 {
		set := `UPDATE requests SET list_order = rowid`
		if pg {
			set = `UPDATE requests SET list_order = (('x' || substr(id, 25))::bit(48)::bigint + 1000)::text::xid8`
		}
		if _, err := db.sql.ExecContext(ctx, set); err != nil {
			tb.Fatal(err)
		}
	}
	analyze := `ANALYZE`
	if pg {
		analyze = `VACUUM ANALYZE requests` // and no dead versions left by the UPDATE
	}
	if _, err := db.sql.ExecContext(ctx, analyze); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkListPage reads one page of 100 of the approvals list from a
// store of 100,000 requests (1,000 pending): the inbox's page (pending,
// newest first), the API's default order (oldest first) of pending
// requests and a later page of it, and every state newest first (the
// history). Set TOOLGATE_BENCH_POSTGRES=1 for Postgres.
func BenchmarkListPage(b *testing.B) {
	cfg := sqliteConfig(filepath.Join(b.TempDir(), "toolgate.db"))
	if os.Getenv("TOOLGATE_BENCH_POSTGRES") == "1" {
		cfg = postgresConfig(pgtest.Fresh(b))
	}
	db := openTest(b, cfg)
	fillListBench(b, db)
	ctx := b.Context()
	// A later page: the cursor after the first 500 pending, oldest first.
	f := store.Filter{State: approval.StatePending, Limit: 500}
	_, later, err := db.ListRequests(ctx, f)
	if err != nil || later == "" {
		b.Fatalf("ListRequests = %q, %v", later, err)
	}
	for _, c := range []struct {
		name string
		f    store.Filter
	}{
		{"inbox", store.Filter{State: approval.StatePending, Descending: true, Limit: 100}},
		{"pending-oldest", store.Filter{State: approval.StatePending, Limit: 100}},
		{"pending-oldest-later", store.Filter{State: approval.StatePending, Limit: 100, Cursor: later}},
		{"all-newest", store.Filter{Descending: true, Limit: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rs, _, err := db.ListRequests(ctx, c.f)
				if err != nil || len(rs) != 100 {
					b.Fatalf("ListRequests = %d, %v", len(rs), err)
				}
			}
		})
	}
}
