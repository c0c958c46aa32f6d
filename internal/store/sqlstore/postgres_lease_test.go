package sqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestRenewLeasesWhilePoolIsBusy holds every connection of the Postgres
// pool in an open transaction, as thousands of CreateRequest transactions
// queued on a busy pool do (docs/performance.md, "Held calls at scale"):
// RenewLeases still renews, on its reserved connection, instead of waiting
// for the pool until its deadline and letting the leases lapse.
func TestRenewLeasesWhilePoolIsBusy(t *testing.T) {
	const maxConns = 2
	cfg := postgresConfig(pgtest.Fresh(t))
	cfg.MaxConns = maxConns
	db := openTest(t, cfg)
	ctx := t.Context()

	r := pendingRequest(testID(1))
	r.Renew("gw-a", t0.Add(time.Minute))
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}

	busy := holdPostgresPool(t, db, maxConns)

	// The lease period of the renewal: a hang guard (the renewal needs
	// milliseconds), not a timing assertion.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	later := t0.Add(time.Hour)
	got, err := db.RenewLeases(rctx, "gw-a", []approval.ID{r.ID}, later)
	if err != nil {
		t.Fatalf("RenewLeases with the pool busy = %v, want the lease renewed", err)
	}
	if len(got) != 1 || got[0] != r.ID {
		t.Errorf("RenewLeases renewed %v, want [%s]", got, r.ID)
	}

	for _, tx := range busy {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := db.GetRequest(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.LeaseUntil.Equal(later) {
		t.Errorf("LeaseUntil = %v, want %v", stored.LeaseUntil, later)
	}
}

// holdPostgresPool opens n transactions on db's main Postgres pool (of
// MaxConns n), so that every connection of it is in use, as thousands of
// queued CreateRequest transactions keep it; the caller rolls them back.
func holdPostgresPool(t *testing.T, db *DB, n int) []*sql.Tx {
	t.Helper()
	busy := make([]*sql.Tx, 0, n)
	for range n {
		tx, err := db.sql.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		busy = append(busy, tx)
	}
	if got := db.d.(*postgresDialect).pool.Stat().AcquiredConns(); int(got) != n {
		t.Fatalf("main pool has %d connections in use, want all %d", got, n)
	}
	return busy
}
