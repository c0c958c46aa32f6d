package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseNoTx: a noTxMarker migration is split into its statements, and
// any statement other than a concurrent index build or drop is refused;
// of the embedded migrations only Postgres's 26 is one.
func TestParseNoTx(t *testing.T) {
	steps, err := parseNoTx(noTxMarker + "\n-- a comment; with a semicolon\n" +
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS a_b ON a (b)\n\tWHERE c = 'd';\n" +
		"create unique index concurrently if not exists e ON e (f);\nDROP INDEX CONCURRENTLY IF EXISTS g;\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []indexStep{
		{stmt: "CREATE INDEX CONCURRENTLY IF NOT EXISTS a_b ON a (b)\n\tWHERE c = 'd'", index: "a_b", create: true},
		{stmt: "create unique index concurrently if not exists e ON e (f)", index: "e", create: true},
		{stmt: "DROP INDEX CONCURRENTLY IF EXISTS g", index: "g"},
	}
	if diff := cmp.Diff(want, steps, cmp.AllowUnexported(indexStep{})); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"CREATE INDEX CONCURRENTLY a ON a (b);",                   // no IF NOT EXISTS: not safe to run again
		"CREATE INDEX IF NOT EXISTS a ON a (b);",                  // not concurrent
		"ALTER TABLE a ADD COLUMN b int;",                         // belongs in a transaction
		"DROP INDEX CONCURRENTLY IF EXISTS a, b;",                 // one index per statement
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS \"A\" ON a (b);", // quoted name
		"-- only a comment\n",
	} {
		if _, err := parseNoTx(noTxMarker + "\n" + bad); err == nil {
			t.Errorf("parseNoTx(%q) = nil error", bad)
		}
	}

	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		ms, err := migrations(driver)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			var got []string
			for _, s := range m.steps {
				got = append(got, s.index)
			}
			var want []string
			if driver == DriverPostgres && m.version == 26 {
				want = []string{"requests_list_order", "grants_list_order"}
			}
			if !cmp.Equal(want, got) {
				t.Errorf("%s %s: concurrent index steps %v, want %v", driver, m.name, got, want)
			}
		}
	}
}

// postgresBackend returns the Postgres entry of backends.
func postgresBackend(t *testing.T) backend {
	t.Helper()
	for _, b := range backends {
		if b.driver == DriverPostgres {
			return b
		}
	}
	t.Fatal("no postgres backend")
	return backend{}
}

// released25 makes a Postgres database at schema version upTo (23, 24 or
// 25) as binaries up to commit 812d89d0 left it: migrations 1..23 and
// rows, then that commit's 24 and 25 (testdata/released25), which built
// the list-order indexes inside the migrations' transaction.
func released25(t *testing.T, upTo int, rows string) Config {
	t.Helper()
	cfg := oldDatabase(t, postgresBackend(t), 23, rows)
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	for v, name := range map[int]string{24: "0024_list_order.sql", 25: "0025_grants_list_order.sql"} {
		if v > upTo {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", "released25", "postgres", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(t.Context(), string(b)); err != nil {
			t.Fatalf("apply released %s: %v", name, err)
		}
		if _, err := raw.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES ($1, $2, 0)`, v, name); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// schemaDump lists the tables' columns, constraints, triggers and indexes
// of cfg's database (current schema), one per line, sorted, and every
// index that is not valid.
func schemaDump(t *testing.T, cfg Config) string {
	t.Helper()
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	rows, err := raw.QueryContext(t.Context(), `
SELECT 'column ' || table_name || '.' || column_name || ' #' || ordinal_position || ' ' || data_type ||
	' nullable=' || is_nullable || ' default=' || COALESCE(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ': ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
UNION ALL
SELECT 'trigger ' || tgrelid::regclass || ' ' || tgname || ': ' || pg_get_triggerdef(oid)
FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT 'INVALID index ' || indexrelid::regclass FROM pg_index WHERE NOT indisvalid
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOpenReleased25MatchesFresh: databases the binaries up to 812d89d0
// left at versions 23, 24 and 25 (24 and 25 then built their indexes in
// the migrations' transaction) open, record every version once, and end
// with the schema of a new database: 24 and 25 changed, without the index
// builds, and 26 builds what they built.
func TestOpenReleased25MatchesFresh(t *testing.T) {
	fresh := postgresBackend(t).fresh(t)
	openTest(t, fresh)
	want := schemaDump(t, fresh)
	if !strings.Contains(want, "index requests_list_order: CREATE INDEX requests_list_order ON public.requests USING btree (list_order, id)\n") ||
		!strings.Contains(want, "index grants_list_order: CREATE INDEX grants_list_order ON public.grants USING btree (list_order, id)\n") {
		t.Fatalf("a new database lacks the list-order indexes:\n%s", want)
	}
	for _, upTo := range []int{23, 24, 25} {
		cfg := released25(t, upTo, "")
		db := openTest(t, cfg)
		checkMigrations(t, db)
		if diff := cmp.Diff(want, schemaDump(t, cfg)); diff != "" {
			t.Errorf("a database at released version %d, opened, differs from a new one (-new +upgraded):\n%s", upTo, diff)
		}
	}
}

// v2RequestInsert inserts a request of id with the columns of schema version 2
// (every later one has a default).
func v2RequestInsert(id string) string {
	return `INSERT INTO requests (id, state, server, tool, arguments_hash, display_warnings, tool_digest,
	rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers, valid_for_ms,
	reviews, decided_by, reason, dispatch_outcome, held_by) VALUES
	('` + id + `', 'cancelled', 's', 't', 'h', 'null', 'd', 'rule', 'hold', 'a', '', '', 1, 2, 1, 'null', 0, 'null', '', '', '', '');`
}

// holdSnapshot begins a REPEATABLE READ transaction on raw and takes its
// snapshot, which CREATE INDEX CONCURRENTLY waits for before it ends (and
// a plain CREATE INDEX does not); the caller commits it.
func holdSnapshot(t *testing.T, raw *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := raw.BeginTx(t.Context(), &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var one int
	if err := tx.QueryRowContext(t.Context(), `SELECT 1`).Scan(&one); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitConcurrentBuild returns once a CREATE INDEX CONCURRENTLY of raw's
// database waits for a lock (the snapshot of holdSnapshot), or fails the
// test when finished reports first (Open ended without such a build).
func waitConcurrentBuild(t *testing.T, raw *sql.DB, finished func() bool) {
	t.Helper()
	waitCount(t, raw, "a concurrent index build waited for the open transaction", finished, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'CREATE INDEX CONCURRENTLY%'`)
}

// waitCount returns once query (a count, with args) reads more than 0 on
// raw, or fails the test when finished reports first (Open ended before
// what says).
func waitCount(t *testing.T, raw *sql.DB, what string, finished func() bool, query string, args ...any) {
	t.Helper()
	for {
		if finished() {
			t.Fatalf("Open finished before %s", what)
		}
		var n int
		if err := raw.QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
}

// TestIndexMigrationDoesNotBlockWrites: a database at version 23 with
// requests is opened while another transaction holds a snapshot. The
// list-order index build waits for that transaction (it is concurrent),
// and meanwhile a request is inserted from another connection without
// waiting for any lock; once the transaction ends, Open completes, and
// the new row is in the valid index. A build inside the migrations'
// transaction (812d89d0) does not wait for the snapshot, and holds a
// SHARE lock that the insert would wait for.
func TestIndexMigrationDoesNotBlockWrites(t *testing.T) {
	ctx := t.Context()
	cfg := oldDatabase(t, postgresBackend(t), 23, v2RequestInsert("r1"))
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	snap := holdSnapshot(t, raw)

	opened := make(chan error, 1)
	openAsync(ctx, cfg, opened)
	waitConcurrentBuild(t, raw, func() bool { return len(opened) > 0 })

	w := writeWithoutWaiting(t, raw, v2RequestInsert("r2"))
	if len(opened) > 0 {
		t.Fatalf("Open finished (%v) before the snapshot it waits for ended", <-opened)
	}
	if err := snap.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open = %v", err)
	}
	var n int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_index WHERE indisvalid
		AND indexrelid IN ('requests_list_order'::regclass, 'grants_list_order'::regclass)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d valid list-order indexes, want 2", n)
	}
	// Read through the index (w's session only): the insert is in it.
	if _, err := w.ExecContext(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := w.QueryContext(ctx, `SELECT id FROM requests ORDER BY list_order, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(ids, []string{"r1", "r2"}) {
		t.Errorf("requests in list order = %q, want r1, r2", ids)
	}
}

// writeWithoutWaiting runs stmt on a new connection of raw, which it
// returns (closed when the test ends), and fails the test if the
// statement waits for a lock (pg_stat_activity) or fails.
func writeWithoutWaiting(t *testing.T, raw *sql.DB, stmt string) *sql.Conn {
	t.Helper()
	ctx := t.Context()
	w, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	var pid int
	if err := w.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.ExecContext(ctx, stmt)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the write: %v", err)
			}
			return w
		default:
		}
		var blocked bool
		if err := raw.QueryRowContext(ctx, `SELECT COALESCE(bool_or(wait_event_type = 'Lock'), false)
			FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked {
			t.Fatal("the write waits for a lock the migration holds")
		}
	}
}

// TestMigrationWaitHoldsNoOtherTable: a database at version 23 is opened
// while a transaction that wrote to grants is still open (held here by
// LOCK TABLE … ROW EXCLUSIVE, the lock an INSERT takes). Migration 25's
// ALTER TABLE grants waits for it, and meanwhile a request is inserted
// without waiting: migration 24, which altered requests, committed in a
// transaction of its own. At 812d89d0 24 and 25 shared one transaction,
// and the insert waited for 24's locks on requests (the ALTER's ACCESS
// EXCLUSIVE, the index build's SHARE) until grants was free.
func TestMigrationWaitHoldsNoOtherTable(t *testing.T) {
	ctx := t.Context()
	cfg := oldDatabase(t, postgresBackend(t), 23, v2RequestInsert("r1"))
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	g, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Rollback() }()
	if _, err := g.ExecContext(ctx, `LOCK TABLE grants IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	openAsync(ctx, cfg, opened)
	waitCount(t, raw, "a statement waited for a lock on grants", func() bool { return len(opened) > 0 },
		`SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'grants'::regclass`)
	writeWithoutWaiting(t, raw, v2RequestInsert("r2"))
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open = %v", err)
	}
}

// openAsync opens cfg and closes it in a goroutine, then sends the error
// (nil) to opened; the caller receives it before the test ends.
func openAsync(ctx context.Context, cfg Config, opened chan<- error) {
	go func() {
		db, err := Open(ctx, cfg)
		if err == nil {
			err = db.Close()
		}
		opened <- err
	}()
}

// messageCount is a slog handler counting the records whose message is msg.
type messageCount struct {
	msg string
	n   *atomic.Int64
}

func (h messageCount) Enabled(context.Context, slog.Level) bool { return true }
func (h messageCount) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h messageCount) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h messageCount) WithGroup(string) slog.Handler      { return h }

// TestIndexMigrationAppliesOnceAcrossOpeners: four instances open a
// database at version 23 together while a transaction holds a snapshot.
// One builds the indexes concurrently and waits for that transaction; the
// three others wait for the migrations lock (without a statement that
// holds a snapshot, which the build would wait for in turn: PostgreSQL
// then fails one of them as a deadlock). Once the transaction ends every
// Open succeeds, and each version is recorded once.
func TestIndexMigrationAppliesOnceAcrossOpeners(t *testing.T) {
	ctx := t.Context()
	cfg := oldDatabase(t, postgresBackend(t), 23, v2RequestInsert("r1"))
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	snap := holdSnapshot(t, raw)

	const openers = 4
	var waiting atomic.Int64
	opened := make(chan error, openers)
	for range openers {
		c := cfg
		c.Logger = slog.New(messageCount{msg: "waiting for another instance's schema migration", n: &waiting})
		openAsync(ctx, c, opened)
	}
	waitConcurrentBuild(t, raw, func() bool { return len(opened) > 0 })
	// The three others have found the lock taken: they logged it, or they
	// wait inside pg_advisory_lock.
	for {
		if len(opened) > 0 {
			t.Fatalf("an Open finished (%v) while the build waits", <-opened)
		}
		var inLock int64
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'advisory'`).Scan(&inLock); err != nil {
			t.Fatal(err)
		}
		if waiting.Load()+inLock >= openers-1 {
			break
		}
	}
	if err := snap.Commit(); err != nil {
		t.Fatal(err)
	}
	for range openers {
		if err := <-opened; err != nil {
			t.Errorf("Open = %v", err)
		}
	}
	var n, distinct, maxV int
	if err := raw.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version), max(version) FROM schema_migrations`).Scan(&n, &distinct, &maxV); err != nil {
		t.Fatal(err)
	}
	ms, err := migrations(DriverPostgres)
	if err != nil {
		t.Fatal(err)
	}
	if latest := ms[len(ms)-1].version; n != latest || distinct != latest || maxV != latest {
		t.Errorf("schema_migrations: %d rows, %d versions, newest %d; want %d of each", n, distinct, maxV, latest)
	}
}

// TestInvalidIndexIsRebuilt: a concurrent build of requests_list_order
// failed (here: a unique index over duplicate values) and left an INVALID
// index of that name, as an instance stopped during the build does, before
// version 26 was recorded. The next Open drops it and builds the index of
// migration 26; IF NOT EXISTS alone would have kept the invalid one.
func TestInvalidIndexIsRebuilt(t *testing.T) {
	ctx := t.Context()
	cfg := oldDatabase(t, postgresBackend(t), 25, "BEGIN; "+v2RequestInsert("r1")+v2RequestInsert("r2")+"COMMIT;")
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	_, err := raw.ExecContext(ctx, `CREATE UNIQUE INDEX CONCURRENTLY requests_list_order ON requests (list_order)`)
	if err == nil || sqlState(err) != "23505" {
		t.Fatalf("the failing build = %v, want a unique violation", err)
	}
	var valid bool
	if err := raw.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'requests_list_order'::regclass`).Scan(&valid); err != nil || valid {
		t.Fatalf("the failed build's index: valid %v, %v; want an invalid one", valid, err)
	}
	var warned atomic.Int64
	cfg.Logger = slog.New(messageCount{msg: "dropping an invalid index left by an interrupted build, to build it again", n: &warned})
	openTest(t, cfg)
	var def string
	err = raw.QueryRowContext(ctx, `SELECT pg_get_indexdef(indexrelid) FROM pg_index
		WHERE indexrelid = 'requests_list_order'::regclass AND indisvalid`).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		t.Fatal("requests_list_order is still invalid after Open")
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := "CREATE INDEX requests_list_order ON public.requests USING btree (list_order, id)"; def != want {
		t.Errorf("requests_list_order = %q, want %q", def, want)
	}
	if warned.Load() != 1 {
		t.Errorf("%d warnings of the dropped index, want 1", warned.Load())
	}
}

// TestMigrationLockReleasedAfterOpen: once Open returned, the migrations
// lock is free for another instance although the store keeps its pool
// (the migrating connection went back to it without the lock).
func TestMigrationLockReleasedAfterOpen(t *testing.T) {
	cfg := postgresBackend(t).fresh(t)
	db := openTest(t, cfg)
	if err := db.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	var got bool
	if err := raw.QueryRowContext(t.Context(), `SELECT pg_try_advisory_lock($1)`, int64(lockMigrate)).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !got {
		t.Error("the migrations lock is still held after Open")
	}
}
