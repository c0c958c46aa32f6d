package sqlstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/store/sqlstore/pgtest"
)

// isolatedDatabase returns a fresh database whose sessions begin their
// transactions at isolation level unless they say otherwise (ALTER
// DATABASE … SET default_transaction_isolation: an operator's setting,
// as are the role's and postgresql.conf's).
func isolatedDatabase(t *testing.T, level string) string {
	t.Helper()
	dsn := pgtest.Fresh(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var name string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	// level is one of the test's constants (SET takes no parameters).
	if _, err := conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+
		` SET default_transaction_isolation = '`+level+`'`); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestRenewalSeesTakeOverWhateverTheDefaultIsolation: the lease's
// argument (RenewLeases step 5, the quiet renewal's count) rests on READ
// COMMITTED: the count after the instance row's lock sees a take-over
// that committed while the renewal waited for that lock. A database
// whose default isolation is REPEATABLE READ gave every statement the
// snapshot of the transaction's first one, taken before the wait: the
// count missed the take-over and the old holder was told it still held
// the request the new holder held (two instances both holding it: both
// may run its call). The store's transactions now ask for READ COMMITTED
// themselves. Under a SERIALIZABLE default the base was safe (both
// transactions serializable: the pair fails with 40001 and is retried);
// those cases show that asking READ COMMITTED keeps it so. Both renewals:
// the full one (a new id named) and the quiet one (the ids of the last
// renewal).
func TestRenewalSeesTakeOverWhateverTheDefaultIsolation(t *testing.T) {
	for _, tc := range []struct {
		level string
		quiet bool
	}{{"repeatable read", false}, {"repeatable read", true}, {"serializable", false}, {"serializable", true}} {
		name := tc.level + "/full"
		if tc.quiet {
			name = tc.level + "/quiet"
		}
		t.Run(name, func(t *testing.T) {
			quiet := tc.quiet
			db := openTest(t, postgresConfig(isolatedDatabase(t, tc.level)))
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
			first := ids[:2]
			if quiet {
				first = ids
			}
			mustRenew(t, db, "gw-a", first, t0.Add(5*time.Minute), first...)

			if got := renewDuringTakeOver(t, db, ids); slices.Contains(got, ids[0]) {
				t.Errorf("with %s as the database's default isolation, gw-a's renewal after gw-b's take-over of %s renewed %v: both instances hold it", tc.level, ids[0], got)
			}
		})
	}
}
