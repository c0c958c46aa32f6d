package sqlstore

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestFrozenRenewalDoesNotBlockTakeOver: instance A stops (SIGSTOP, a
// paused VM) inside its lease renewal's transaction, after writing its
// instance lease and before committing. Instance B's take-over of a
// request A held waits for that row lock, as it must while A is alive
// (TestTakeOverWaitsForRenewalInFlight); but once A has sent nothing inside
// the transaction for Config.IdleInTx, the server ends A's session, its
// uncommitted renewal is rolled back, and B takes the lapsed lease over.
// Before, B waited until A resumed or its connection was found dead; the
// e2e TestKilledHolderOnPostgres saw an approval through B time out while A
// was stopped.
func TestFrozenRenewalDoesNotBlockTakeOver(t *testing.T) {
	dsn := pgtest.Fresh(t)
	const idle = 500 * time.Millisecond
	a := openTest(t, Config{Driver: DriverPostgres, DSN: dsn, IdleInTx: idle})
	b := openTest(t, postgresConfig(dsn))
	id := createHeld(t, a, "gw-a", t0.Add(time.Minute), 1)[0]
	mustRenew(t, a, "gw-a", []approval.ID{id}, t0.Add(5*time.Minute), id)

	var timeout string
	if err := a.lsql.QueryRowContext(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "500ms" {
		t.Errorf("the lease pool's idle_in_transaction_session_timeout is %q, want 500ms", timeout)
	}
	frozen, err := a.lsql.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	if _, err := frozen.ExecContext(t.Context(), `UPDATE instance_leases SET lease_until = $1 WHERE instance = 'gw-a'`,
		t0.Add(20*time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard: before, it hung
	defer cancel()
	start := time.Now()
	got, err := takeOver(ctx, b, id, "gw-b", t0.Add(10*time.Minute))
	if err != nil {
		t.Fatalf("take-over while A is frozen in its renewal: %v after %v, want it taken over once the server ended A's session", err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("taken over %v after A froze (IdleInTx %v)", time.Since(start).Round(time.Millisecond), idle)
	if got.HeldBy != "gw-b" {
		t.Errorf("held by %q, want gw-b", got.HeldBy)
	}
	if err := frozen.Commit(); err == nil {
		t.Error("A's renewal committed after it was frozen past IdleInTx, want an error (its session was ended)")
	}
	if h, _ := leaseOf(t, b, id); h != "gw-b" {
		t.Errorf("after A resumed, held by %q, want gw-b", h)
	}
}

// TestIdleInTxKeepsTheDSNs: a DSN that sets
// idle_in_transaction_session_timeout keeps its value, however it spells
// the name (PostgreSQL reads it case-blind and with dashes for
// underscores), and so does the database's own setting (ALTER DATABASE …
// SET). On the base the spellings other than the first were overwritten
// with 10s.
func TestIdleInTxKeepsTheDSNs(t *testing.T) {
	dsn := pgtest.Fresh(t)
	with := func(param, value string) string {
		if !strings.HasPrefix(dsn, "postgres") {
			return dsn + " " + param + "='" + value + "'"
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + url.PathEscape(param) + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")
	}
	show := func(db *DB) string {
		var v string
		if err := db.sql.QueryRowContext(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, d := range []string{
		with("options", "-c idle_in_transaction_session_timeout=1h"),
		with("options", "-c IDLE_IN_TRANSACTION_SESSION_TIMEOUT=1h"),
		with("options", "-c idle-in-transaction-session-timeout=1h"),
		with("options", "--idle-in-transaction-session-timeout=1h"),
		with("IDLE_IN_TRANSACTION_SESSION_TIMEOUT", "1h"),
	} {
		if v := show(openTest(t, Config{Driver: DriverPostgres, DSN: d})); v != "1h" {
			t.Errorf("DSN %s: idle_in_transaction_session_timeout %q, want the DSN's 1h", d, v)
		}
	}
	def := openTest(t, postgresConfig(dsn))
	var v string
	if err := def.asql.QueryRowContext(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "10s" {
		t.Errorf("the admin pool's idle_in_transaction_session_timeout %q, want the default 10s", v)
	}
	// The test's own database (pgtest.Fresh), so no other test sees it.
	var name string
	if err := def.sql.QueryRowContext(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := def.sql.ExecContext(t.Context(), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET idle_in_transaction_session_timeout = '2min'`); err != nil {
		t.Fatal(err)
	}
	if v := show(openTest(t, postgresConfig(dsn))); v != "2min" {
		t.Errorf("a database set to 2min: idle_in_transaction_session_timeout %q, want 2min", v)
	}
}
