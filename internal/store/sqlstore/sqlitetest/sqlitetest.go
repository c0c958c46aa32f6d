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
func Open(t testing.TB) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(t.TempDir(), "toolgate.db")})
	if err != nil {
		t.Fatalf("open test sqlite store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close test sqlite store: %v", err)
		}
	})
	return db
}
