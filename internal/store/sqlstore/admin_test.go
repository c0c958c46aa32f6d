package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestAdminReadsWhilePoolIsBusy holds every connection of the Postgres
// pool in an open transaction, as thousands of CreateRequest transactions
// queued on a busy pool do (docs/performance.md, "Held calls at scale",
// N = 10,000 on Postgres): the admin API's list of pending approvals and
// its get of one still answer, on the connections reserved for them
// (AdminConns), instead of waiting for the pool until their deadline.
func TestAdminReadsWhilePoolIsBusy(t *testing.T) {
	const maxConns = 2
	cfg := postgresConfig(pgtest.Fresh(t))
	cfg.MaxConns = maxConns
	db := openTest(t, cfg)
	ctx := t.Context()

	r := pendingRequest(testID(1))
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}

	busy := holdPostgresPool(t, db, maxConns)
	defer func() {
		for _, tx := range busy {
			_ = tx.Rollback()
		}
	}()

	// A hang guard (each read needs milliseconds), not a timing assertion:
	// without connections of their own the reads wait for the busy pool
	// until it passes.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, next, err := db.ListRequests(rctx, store.Filter{State: approval.StatePending})
	if err != nil {
		t.Fatalf("ListRequests with the pool busy = %v, want the pending request", err)
	}
	if len(rs) != 1 || rs[0].ID != r.ID || next != "" {
		t.Errorf("ListRequests listed %d requests (next %q), want only %s", len(rs), next, r.ID)
	}
	got, err := db.ViewRequest(rctx, r.ID)
	if err != nil {
		t.Fatalf("ViewRequest with the pool busy = %v, want the request", err)
	}
	if got.ID != r.ID || got.State != approval.StatePending {
		t.Errorf("ViewRequest = %s %s, want %s pending", got.ID, got.State, r.ID)
	}
	if _, err := db.ViewRequest(rctx, testID(2)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ViewRequest of an unknown id = %v, want ErrNotFound", err)
	}
	if n := db.d.(*postgresDialect).admin.Stat().MaxConns(); n != AdminConns {
		t.Errorf("admin pool holds up to %d connections, want AdminConns = %d", n, AdminConns)
	}
}

// TestAdminReadsWhileSQLiteReadPoolIsBusy holds every connection of the
// SQLite read pool, as thousands of admissions reading at once do (the
// list of pending approvals timed out at N = 10,000 on SQLite too): the
// admin API's list and get still answer, on their own connections.
func TestAdminReadsWhileSQLiteReadPoolIsBusy(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "t.db")))
	ctx := t.Context()
	r := pendingRequest(testID(1))
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	for range sqliteReadConns + 1 {
		c, err := db.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
	}
	if n := db.sql.Stats().InUse; n != sqliteReadConns+1 {
		t.Fatalf("read pool has %d connections in use, want all %d", n, sqliteReadConns+1)
	}
	// A hang guard, not a timing assertion (see above).
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, _, err := db.ListRequests(rctx, store.Filter{State: approval.StatePending})
	if err != nil || len(rs) != 1 || rs[0].ID != r.ID {
		t.Fatalf("ListRequests with the read pool busy = %d requests, %v; want %s", len(rs), err, r.ID)
	}
	if got, err := db.ViewRequest(rctx, r.ID); err != nil || got.ID != r.ID {
		t.Fatalf("ViewRequest with the read pool busy = %s, %v; want %s", got.ID, err, r.ID)
	}
}
