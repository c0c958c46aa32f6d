package policystore_test

import (
	"testing"

	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// eachStore runs fn on SQLite and on a fresh Postgres database (skipped
// unless TOOLGATE_TEST_POSTGRES is set: scripts/test.sh starts one), as the
// store's and the gate's tests do.
func eachStore(t *testing.T, fn func(t *testing.T, db *sqlstore.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, sqlitetest.Open(t)) })
	t.Run("postgres", func(t *testing.T) {
		db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: pgtest.Fresh(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		fn(t, db)
	})
}
