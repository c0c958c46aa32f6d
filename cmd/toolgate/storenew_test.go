package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for _, want := range []string{
		`msg="new, empty store created; schema migrations are applied" driver=sqlite path=` + db,
		`msg="store opened; schema migrations are applied" driver=sqlite path=` + db,
	} {
		ctx, cancel := context.WithCancel(t.Context())
		ready := make(chan map[string]string, 1)
		done := make(chan error, 1)
		stderr := new(syncBuffer)
		go func() {
			done <- serveWith(ctx, []string{"--config", path}, serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
				sys: testSystem(nil), onReady: func(r map[string]string) { ready <- r }})
		}()
		select {
		case <-ready:
		case err := <-done:
			cancel()
			t.Fatalf("serve = %v before it was ready\nstderr:\n%s", err, stderr)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve = %v after its context ended\nstderr:\n%s", err, stderr)
		}
		if out := stderr.String(); !strings.Contains(out, want) {
			t.Errorf("serve's log does not say %s:\n%s", want, out)
		}
	}
}
