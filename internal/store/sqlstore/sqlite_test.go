package sqlstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"toolgate/internal/store"
)

func sqliteConfig(path string) Config { return Config{Driver: DriverSQLite, Path: path} }

// TestOpenSQLite checks the connection settings of STYLE R21 and the modes
// of a new directory and file.
func TestOpenSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "toolgate.db")
	db := openTest(t, sqliteConfig(path))
	if err := db.CreateRequest(t.Context(), pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	pragmas := []struct {
		pragma, want string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "5000"},
		{"foreign_keys", "1"},
	}
	for _, p := range pragmas {
		var got string
		if err := db.sql.QueryRowContext(t.Context(), "PRAGMA "+p.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s = %v", p.pragma, err)
		}
		if got != p.want {
			t.Errorf("PRAGMA %s = %q, want %q", p.pragma, got, p.want)
		}
	}
	modes := []struct {
		path string
		want os.FileMode
	}{
		{filepath.Dir(path), 0o700 | os.ModeDir},
		{path, 0o600},
	}
	for _, m := range modes {
		fi, err := os.Stat(m.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != m.want {
			t.Errorf("mode of %s = %v, want %v", m.path, fi.Mode(), m.want)
		}
	}
}

func TestOpenSQLiteRefuses(t *testing.T) {
	notDB := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(notDB, []byte("this is not an SQLite database, not even close to one......."), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path      string
		wantUnavailable bool
	}{
		{"empty path", "", false},
		{"question mark", filepath.Join(t.TempDir(), "a?b.db"), false},
		{"memory", ":memory:", false},
		{"not a database", notDB, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.Context(), sqliteConfig(tc.path))
			if err == nil {
				_ = db.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tc.path)
			}
			if got := errors.Is(err, store.ErrUnavailable); got != tc.wantUnavailable {
				t.Errorf("Open(%q) = %v; errors.Is(ErrUnavailable) = %v, want %v", tc.path, err, got, tc.wantUnavailable)
			}
		})
	}
}
