package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditVerifyWithoutAStore: audit verify on a config whose SQLite file
// does not exist (run from another directory than serve, with the
// quickstart's relative storage.path) fails and names the path it looked
// at, instead of creating an empty store and answering "ok: 0 links".
func TestAuditVerifyWithoutAStore(t *testing.T) {
	path := writeConfig(t, "storage: { path: DB }\n")
	db := filepath.Join(filepath.Dir(path), "toolgate.db")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"audit", "verify", "--config", path}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "no store at "+db) || strings.Contains(stdout.String(), "ok:") {
		t.Errorf("stdout %q, stderr %q: want no verdict and a message naming %s", stdout.String(), stderr.String(), db)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("audit verify left a store at %s (%v)", db, err)
	}
}
