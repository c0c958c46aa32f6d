package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"

	"toolgate/internal/config"
	"toolgate/internal/store/sqlstore"
)

// checkStoragePath refuses a SQLite storage.path whose directory does not
// exist (or is not a directory). Only the default path's directory
// (./data, of ./data/toolgate.db) is created by serve: the quickstart's
// first start needs it, and it is always the same place. A configured
// path is the operator's; a typo in it (/var/lib/toolgat/...) would
// otherwise start an empty store, with every pending approval "gone",
// and policy check would say ok. A relative path is taken from the
// working directory, as the store opens it.
func checkStoragePath(s config.Storage) error {
	if s.Driver != sqlstore.DriverSQLite || s.Path == "" {
		return nil
	}
	if filepath.Clean(s.Path) == filepath.Clean(config.Default().Storage.Path) {
		return nil
	}
	dir := filepath.Dir(s.Path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("storage.path %q: directory %s does not exist; create it (mode 0700, owned by the service user) or correct the path (serve creates only the default path's directory, ./data, so that a mistyped path does not start an empty store)", s.Path, absPath(dir))
	case err != nil:
		return fmt.Errorf("storage.path %q: directory %s: %w", s.Path, absPath(dir), err)
	case !fi.IsDir():
		return fmt.Errorf("storage.path %q: %s is not a directory", s.Path, absPath(dir))
	}
	return nil
}

// absPath is p made absolute, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
