package sqlstore

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestPostgresGetTaskAfterTheServerDroppedItsConnections: GetTask takes
// its connection without the pool's ping (pgGetTask); when the server
// closed the pool's connections meanwhile, the read finds its connection
// broken and is sent again on a pinged one. The task read back is the
// one written, a direct task's state and lease included (pgx scans them,
// not database/sql), and a missing task is store.ErrNotFound.
func TestPostgresGetTaskAfterTheServerDroppedItsConnections(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	want := store.Task{
		RequestID:  testID(1),
		Principal:  approval.Principal{ID: "session:abc", Kind: "agent", Tenant: "acme"},
		CreatedAt:  t0,
		ExpiresAt:  t0.Add(time.Hour),
		State:      store.TaskWorking,
		LeaseUntil: t0.Add(time.Minute),
	}
	if err := db.CreateTask(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetTask(t.Context(), want.RequestID); err != nil { // the pool has a connection to drop
		t.Fatal(err)
	}
	var n int
	if err := db.asql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1) AS k`, PoolApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no pool connection to terminate")
	}
	got, err := db.GetTask(t.Context(), want.RequestID)
	if err != nil {
		t.Fatalf("GetTask after the server closed the pool's connections: %v", err)
	}
	if diff := cmp.Diff(store.NormalizeTask(want), got); diff != "" {
		t.Errorf("GetTask (-want +got):\n%s", diff)
	}
	if _, err := db.GetTask(t.Context(), testID(2)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTask of no task = %v, want store.ErrNotFound", err)
	}
}
