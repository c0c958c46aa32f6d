package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, filepath.Join(t.TempDir(), "toolgate.db"))
	})
}

// openTest opens path and closes it when the test ends.
func openTest(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return db
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pendingRequest(id approval.ID) approval.Request {
	return approval.Request{
		ID: id, State: approval.StatePending, Server: "pay", Tool: "transfer",
		Arguments: []byte(`{"to":"acct-9","amount":12}`), ArgumentsHash: "sha256:00", RequestedBy: "desktop",
		Tenant: "acme", CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute), RequiredApprovals: 1, ValidFor: 10 * time.Minute,
	}
}

// TestTwoHandlesDecideExactlyOnce races 8 decisions through two *DB on one
// file, as two gateway processes sharing it would.
func TestTwoHandlesDecideExactlyOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	dbs := []*DB{openTest(t, path), openTest(t, path)}
	r := pendingRequest("01900000-0000-7000-8000-000000000001")
	if err := dbs[0].CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		winners []string
		start   = make(chan struct{})
		wg      sync.WaitGroup
	)
	for i := range 8 {
		db, name := dbs[i%2], fmt.Sprint("rev", i)
		v := approval.VerdictApprove
		if i%3 == 0 {
			v = approval.VerdictDeny
		}
		wg.Go(func() {
			<-start
			_, err := db.UpdateRequest(t.Context(), r.ID, name, func(cur *approval.Request) error {
				return cur.Review(approval.Reviewer{ID: name}, v, "", "", t0.Add(time.Minute))
			})
			switch {
			case err == nil:
				mu.Lock()
				winners = append(winners, name)
				mu.Unlock()
			case !errors.Is(err, approval.ErrResolved) && !errors.Is(err, approval.ErrConflict):
				t.Errorf("review by %s = %v", name, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d winners %v, want 1", len(winners), winners)
	}
	got, err := dbs[1].GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DecidedBy != winners[0] || len(got.Reviews) != 1 {
		t.Errorf("decided by %q with %d reviews, want %q with 1", got.DecidedBy, len(got.Reviews), winners[0])
	}
	evs, err := dbs[1].Events(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("events = %+v, want requested, reviewed and one decision", evs)
	}
}

func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "toolgate.db")
	db, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	r := pendingRequest("01900000-0000-7000-8000-000000000001")
	if err := db.CreateRequest(t.Context(), r); err != nil {
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
	if err := db.Close(); err != nil {
		t.Fatal(err)
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

	// Reopening keeps the data (nothing is lost on restart, case C13) and
	// applies no migration twice.
	db = openTest(t, path)
	got, err := db.GetRequest(t.Context(), r.ID)
	if err != nil || got.ExpiresAt != r.ExpiresAt {
		t.Errorf("after reopening: GetRequest = %+v, %v", got, err)
	}
	var n int
	if err := db.sql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if ms, _ := migrations(); n != len(ms) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
	}
}

// TestOpenConcurrently opens one new file from several goroutines at once,
// as processes starting together would: each migration applies once.
func TestOpenConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	var wg sync.WaitGroup
	dbs := make([]*DB, 4)
	for i := range dbs {
		wg.Go(func() {
			db, err := Open(t.Context(), path, nil)
			if err != nil {
				t.Errorf("Open = %v", err)
				return
			}
			dbs[i] = db
		})
	}
	wg.Wait()
	for _, db := range dbs {
		if db != nil {
			t.Cleanup(func() { db.Close() })
		}
	}
	if t.Failed() {
		return
	}
	var n int
	if err := dbs[0].sql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if ms, _ := migrations(); n != len(ms) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
	}
}

func TestOpenRefuses(t *testing.T) {
	newer := filepath.Join(t.TempDir(), "newer.db")
	db := openTest(t, newer)
	if _, err := db.sql.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
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
		{"newer schema", newer, false},
		{"not a database", notDB, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.Context(), tc.path, nil)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tc.path)
			}
			if got := errors.Is(err, store.ErrUnavailable); got != tc.wantUnavailable {
				t.Errorf("Open(%q) = %v; errors.Is(ErrUnavailable) = %v, want %v", tc.path, err, got, tc.wantUnavailable)
			}
		})
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "toolgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	id := approval.ID("01900000-0000-7000-8000-000000000001")
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Ping", db.Ping},
		{"GetRequest", func(ctx context.Context) error { _, err := db.GetRequest(ctx, id); return err }},
		{"CreateRequest", func(ctx context.Context) error { return db.CreateRequest(ctx, pendingRequest(id)) }},
		{"UpdateRequest", func(ctx context.Context) error {
			_, err := db.UpdateRequest(ctx, id, "bob", func(*approval.Request) error { return nil })
			return err
		}},
		{"ListRequests", func(ctx context.Context) error { _, _, err := db.ListRequests(ctx, store.Filter{}); return err }},
		{"Due", func(ctx context.Context) error { _, err := db.Due(ctx, t0, 0); return err }},
		{"CountPending", func(ctx context.Context) error { _, err := db.CountPending(ctx, ""); return err }},
		{"Events", func(ctx context.Context) error { _, err := db.Events(ctx, 0, 0); return err }},
	}
	for _, c := range calls {
		if err := c.call(t.Context()); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want ErrUnavailable", c.name, err)
		}
	}
}
