package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"toolgate/internal/store/sqlstore"
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

// TestAuditVerifyRefusesADSNThatDoesNotParse: a storage.dsn that does not
// parse is an invalid config (exit 2, as serve and policy check say), and
// the message does not show the string, which may hold a password.
func TestAuditVerifyRefusesADSNThatDoesNotParse(t *testing.T) {
	path := writeConfig(t, "storage: { driver: postgres, dsn: \"host=127.0.0.1 password = pg-s3cret-91 sslmode=bogus\" }\n")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"audit", "verify", "--config", path}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "storage.dsn: invalid Postgres connection string: failed to configure TLS (sslmode is invalid)") {
		t.Errorf("exit %d, stderr %q: want 2 naming storage.dsn and what is wrong", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "pg-s3cret-91") {
		t.Errorf("stderr shows the password: %q", stderr.String())
	}
}

// TestAuditVerifyJSONNames: `audit verify --json` names its fields in
// snake_case, as docs/audit.md shows and the rest of the API does (it
// printed Go's field names, "OK", "BrokenSeq", …).
func TestAuditVerifyJSONNames(t *testing.T) {
	path := writeConfig(t, "storage: { path: DB }\n")
	db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(filepath.Dir(path), "toolgate.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"audit", "verify", "--json", "--config", path}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v in %q", err, stdout.String())
	}
	want := []string{"anchor", "anchor_hash", "broken_seq", "head", "head_hash", "links", "ok", "problem"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) || got["ok"] != true {
		t.Errorf("verify --json = %s; want the keys %q and ok true", stdout.String(), want)
	}
}
