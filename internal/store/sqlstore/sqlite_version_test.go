package sqlstore

import (
	"path/filepath"
	"testing"
)

// TestWatchPollIsPrepared: the SQLite watch's poll (versionReader) prepares
// PRAGMA data_version once per connection and reuses it, so an idle
// gateway's poll every 250 ms runs neither SQLite's parser nor its code
// generator (the code those map back after an idle release,
// docs/performance.md). A read allocates less than the same pragma queried
// unprepared on the same connection (measured here, in this run); a commit
// by another connection still changes the value read; after close the next
// read prepares again on a new connection.
func TestWatchPollIsPrepared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	a := openTest(t, sqliteConfig(path))
	b := openTest(t, sqliteConfig(path))
	ctx := t.Context()

	var r versionReader
	defer r.close()
	v0, err := r.read(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	st := r.stmt
	if st == nil {
		t.Fatal("no statement kept after a read")
	}
	prepared := testing.AllocsPerRun(50, func() {
		if _, err := r.read(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	if r.stmt != st {
		t.Fatal("the statement changed between reads: prepared again")
	}
	unprepared := testing.AllocsPerRun(50, func() {
		var v int64
		if err := r.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per read: prepared %.0f, unprepared %.0f", prepared, unprepared)
	if prepared >= unprepared {
		t.Fatalf("a read allocates %.0f, the pragma queried through database/sql %.0f: want fewer", prepared, unprepared)
	}

	if err := b.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	v1, err := r.read(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if v1 == v0 {
		t.Fatalf("data_version %d before and after another connection's commit: the prepared read sees no change", v0)
	}
	r.close()
	if r.stmt != nil || r.conn != nil {
		t.Fatal("close kept the statement or the connection")
	}
	if _, err := r.read(ctx, a); err != nil || r.stmt == nil {
		t.Fatalf("read after close = %v, statement %v", err, r.stmt)
	}
}
