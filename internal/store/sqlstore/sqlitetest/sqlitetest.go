// Package sqlitetest opens throwaway SQLite stores for the tests of other
// packages (the gate, the API): a real database, not a mock (STYLE R22).
package sqlitetest

import (
	"path/filepath"
	"testing"

	"toolgate/internal/store/sqlstore"
)

// Open returns a migrated SQLite *sqlstore.DB on a new file in t.TempDir(),
// closed when the test ends. It works inside a testing/synctest bubble. The
// test fails at once if the database cannot be opened.
func Open(tb testing.TB) *sqlstore.DB {
	tb.Helper()
	db, err := sqlstore.Open(tb.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(tb.TempDir(), "toolgate.db")})
	if err != nil {
		tb.Fatalf("open test sqlite store: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close test sqlite store: %v", err)
		}
	})
	return db
}
