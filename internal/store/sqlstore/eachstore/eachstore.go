// Package eachstore runs a test on both databases toolgate supports: a
// SQLite file and a fresh Postgres database (pgtest.Fresh: skipped unless
// TOOLGATE_TEST_POSTGRES is set, which scripts/test.sh does).
package eachstore

import (
	"testing"

	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// Run runs fn as the subtests "sqlite" and "postgres" of t, each with its
// own open store, closed when the subtest ends.
func Run(t *testing.T, fn func(t *testing.T, db *sqlstore.DB)) {
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
