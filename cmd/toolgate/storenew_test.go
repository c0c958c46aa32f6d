package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/store/sqlstore/pgtest"
)

// TestServeSaysEmptyFileIsNewStore: a SQLite file a failed first start
// left empty (here made empty by hand) holds no schema, so serve's log
// calls it a new, empty store, as for a path that did not exist; on
// a33a630b it said "store opened", since the file existed. The next start
// on the now migrated file says "store opened".
func TestServeSaysEmptyFileIsNewStore(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals)
	db := filepath.Join(filepath.Dir(path), "toolgate.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	serveSaysStore(t, path,
		`msg="new, empty store created; schema migrations are applied" driver=sqlite path=`+db,
		`msg="store opened; schema migrations are applied" driver=sqlite path=`+db)
}

// TestServeSaysFreshPostgresIsNewStore: serve on a Postgres database
// without toolgate's schema says it starts a new, empty store, by the
// same rule as SQLite (sqlstore.DB.Created); the next start on the now
// migrated database says "store opened". On 2e5a812 Postgres always said
// "store opened". Skipped without TOOLGATE_TEST_POSTGRES.
func TestServeSaysFreshPostgresIsNewStore(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { driver: postgres, dsn: \""+pgtest.Fresh(t)+"\" }\n"+principals)
	serveSaysStore(t, path,
		`msg="new, empty store created; schema migrations are applied" driver=postgres`,
		`msg="store opened; schema migrations are applied" driver=postgres`)
}

// serveSaysStore starts serve with the config at path once for each of
// wants, in order, until it is ready, stops it, and checks that its log
// holds that want.
func serveSaysStore(t *testing.T, path string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		_, stderr, stop := startServe(t, path)
		stop()
		if out := stderr.String(); !strings.Contains(out, want) {
			t.Errorf("serve's log does not say %s:\n%s", want, out)
		}
	}
}
