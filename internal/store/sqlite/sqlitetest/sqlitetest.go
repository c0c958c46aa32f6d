// Package sqlitetest opens throwaway SQLite stores for the tests of other
// packages (the gate, the API): a real database, not a mock (STYLE R22).
package sqlitetest

import (
	"path/filepath"
	"testing"

	"toolgate/internal/store/sqlite"
)

// Open returns a migrated *sqlite.DB on a new file in t.TempDir(), closed
// when the test ends. It works inside a testing/synctest bubble. The test
// fails at once if the database cannot be opened.
func Open(t testing.TB) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "toolgate.db"), nil)
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
