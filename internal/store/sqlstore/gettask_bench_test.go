package sqlstore

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// BenchmarkGetTask reads a task (found) and a missing one on Postgres, the
// REST API's read per decision (Gate.HeldAsTask): "pgx" is GetTask
// (pgGetTask: one round trip, no ping), "database-sql" the read it
// replaced (the pool's ping, then the query). With -count each
// sub-benchmark runs its rounds one after the other (pgx's, then
// database-sql's): a short -benchtime keeps both within seconds.
// cpu-us/op is this process's CPU and that of the one backend serving
// the pool (MaxConns 1) per read.
func BenchmarkGetTask(b *testing.B) {
	cfg := postgresConfig(pgtest.Fresh(b))
	cfg.MaxConns = 1
	db := openTest(b, cfg)
	backend := 0
	if err := db.sql.QueryRowContext(b.Context(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B, read func(i int) error) {
		b.Helper()
		cpu0 := cpuTime(b, backend)
		for i := 0; b.Loop(); i++ {
			if err := read(i); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime(b, backend)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	}
	task := store.Task{RequestID: testID(1), Principal: approval.Principal{ID: "session:abc", Kind: "agent"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := db.CreateTask(b.Context(), task); err != nil {
		b.Fatal(err)
	}
	ids := []approval.ID{task.RequestID, testID(2)} // with a task, without (the usual decision)
	b.Run("pgx", func(b *testing.B) {
		measure(b, func(i int) error {
			if _, err := db.GetTask(b.Context(), ids[i%2]); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		})
	})
	b.Run("database-sql", func(b *testing.B) {
		var (
			principal, state     any
			args                 []byte
			createdAt, expiresAt int64
			lease                any
		)
		measure(b, func(i int) error {
			err := db.queryRow(b.Context(), getTaskSQL, string(ids[i%2])).Scan(&principal, &args, &createdAt, &expiresAt, &state, &lease)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return nil
		})
	})
}
