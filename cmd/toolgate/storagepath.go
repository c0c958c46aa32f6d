package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"toolgate/internal/config"
	"toolgate/internal/store/sqlstore"
)

// storagePathWarning says, for a SQLite storage.path whose directory does
// not exist, that serve will create it (mode 0700) and start a new, empty
// store there: a mistyped path (/var/lib/toolgat/...) would otherwise do so
// silently, with every pending approval out of sight, while policy check
// said ok. serve logs it at WARN; policy check prints it. The directory is
// still created, not refused: the default path's ./data and the templates
// that point storage.path into a fresh directory (../shared/perf's
// tg-run.sh) rely on that. It also warns about a directory every user may
// write (/tmp): another user could place the store's -wal or -shm file, or
// a link, there first (attack30). "" when the directory exists and is not
// world-writable, the path is the default one, or the store is not SQLite. A relative path is taken from
// the working directory, as the store opens it.
func storagePathWarning(s config.Storage) string {
	if s.Driver != sqlstore.DriverSQLite || s.Path == "" {
		return ""
	}
	if filepath.Clean(s.Path) == filepath.Clean(config.Default().Storage.Path) {
		return ""
	}
	dir := filepath.Dir(s.Path)
	fi, err := os.Stat(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Sprintf("storage.path %q: directory %s does not exist; serve creates it and starts a new, empty store there (if the path is mistyped, the existing store and its pending approvals are not read)", s.Path, absPath(dir))
	}
	if err == nil && fi.IsDir() && fi.Mode().Perm()&0o002 != 0 {
		return fmt.Sprintf("storage.path %q: directory %s is writable by every user (mode %#o): any of them can put a file or link where the store or its -wal and -shm files go; use a directory only toolgate's user can write", s.Path, absPath(dir), fi.Mode().Perm())
	}
	return ""
}

// checkStoragePath refuses a SQLite storage.path whose directory is not a
// directory (a file, or a path through one), whose missing directory runs
// through a symbolic link to a missing target (serve could not create it),
// or that is itself a directory, naming the key and the path; the store
// could not be opened there. A missing directory is storagePathWarning's.
func checkStoragePath(s config.Storage) error {
	if s.Driver != sqlstore.DriverSQLite || s.Path == "" {
		return nil
	}
	if err := storagePathForm(s.Path); err != nil {
		return err
	}
	if fi, err := os.Stat(s.Path); err == nil && fi.IsDir() {
		return fmt.Errorf("storage.path %q: %s is a directory, not a file (name the database file in it)", s.Path, absPath(s.Path))
	}
	dir := filepath.Dir(s.Path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		if link := danglingLink(dir); link != "" {
			return fmt.Errorf("storage.path %q: %s is a symbolic link to a missing directory; serve cannot create %s", s.Path, absPath(link), absPath(dir))
		}
		return nil
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("storage.path %q: %s is not a directory", s.Path, absPath(dir))
	case err != nil:
		return fmt.Errorf("storage.path %q: directory %s: %w", s.Path, absPath(dir), err)
	case !fi.IsDir():
		return fmt.Errorf("storage.path %q: %s is not a directory", s.Path, absPath(dir))
	}
	return nil
}

// storagePathForm refuses a SQLite storage.path that is not a plain file
// path, as the store's open would (sqlstore) or should: one ending in a
// separator (a directory: serve made it, then could not open it), an
// in-memory database, SQLite options after '?', or a "file:" URI (the
// store made a file of that literal name, mode 0600, and SQLite opened
// the URI's file beside it with the umask's mode) (attack31).
func storagePathForm(p string) error {
	switch {
	case os.IsPathSeparator(p[len(p)-1]):
		return fmt.Errorf("storage.path %q ends in %q: it names a directory, not the database file (name the file in it)", p, p[len(p)-1:])
	case p == ":memory:":
		return fmt.Errorf("storage.path %q: an in-memory database is not a store (approvals would not outlive the process); name a file", p)
	case strings.ContainsRune(p, '?'):
		return fmt.Errorf("storage.path %q: SQLite options (\"?\") are not taken; name the file alone (toolgate sets its own)", p)
	case strings.HasPrefix(p, "file:"):
		return fmt.Errorf("storage.path %q: a \"file:\" URI is not taken; name the file as a path", p)
	}
	return nil
}

// danglingLink returns the nearest of missing path dir and its parents
// that exists as a symbolic link (whose target does not), or "".
func danglingLink(dir string) string {
	for p := dir; ; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&iofs.ModeSymlink != 0 {
				return p
			}
			return ""
		}
		if filepath.Dir(p) == p {
			return ""
		}
	}
}

// absPath is p made absolute, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// storageWhereWarning says, for a SQLite storage.path that is relative and
// names no store from the working directory (no file, or one holdsStore
// knows to be without a schema), while a store of that
// relative path exists beside the config file (in its directory or one
// above it, as the quickstart's ./data/toolgate.db is from the repository
// root), that serve takes the path from the working directory and starts
// a new, empty store there, with every pending approval and the audit
// trail of the existing one out of sight: a quickstart started from
// outside the repository did so silently. "" otherwise: a first start
// anywhere makes its store without a warning (serve's log line names the
// new store's absolute path). serve logs it at WARN; policy check prints
// it. The path keeps meaning what it always did (relative to the working
// directory, as every other relative path of the config): changing that
// would move existing stores.
func storageWhereWarning(s config.Storage, configPath string) string {
	if s.Driver != sqlstore.DriverSQLite || s.Path == "" || filepath.IsAbs(s.Path) || configPath == "" {
		return ""
	}
	if fi, err := os.Stat(s.Path); (err == nil && (fi.IsDir() || holdsStore(s.Path))) || (err != nil && !errors.Is(err, iofs.ErrNotExist)) {
		return "" // the store is there (or cannot be looked at: the open says why)
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	cfgDir := filepath.Dir(absPath(configPath))
	for d := cfgDir; ; d = filepath.Dir(d) {
		if other := filepath.Join(d, s.Path); d != wd && holdsStore(other) {
			return fmt.Sprintf("storage.path %q is relative, so it is taken from the working directory %s; no store is there, so serve creates a new, empty one at %s, while a store exists at %s (beside the config file %s): start serve from %s, or give storage.path as an absolute path",
				s.Path, wd, filepath.Join(wd, s.Path), other, configPath, d)
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// holdsStore reports whether p names a file that may hold a store: a
// non-directory that is not known to be without a schema. It is the part
// of sqlstore.DB.Created's rule (no schema: a new, empty store) that can
// be read without opening the file, which storageWhereWarning must not do
// (policy check runs it, and opening a SQLite file may create it or its
// -shm): a file of 0 bytes whose write-ahead log (p-wal) is missing or
// empty holds no schema, as a failed first start leaves it. A file with
// bytes but no schema still counts as a store.
func holdsStore(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() {
		return false
	}
	if fi.Size() > 0 {
		return true
	}
	wal, err := os.Stat(p + "-wal")
	return err == nil && wal.Size() > 0
}
