package sqlstore

import (
	"context"
	"testing"
)

// TestGroupedWriteIgnoresCallerCancellation: once the batcher has started a
// caller's function, that caller going away (a cancelled context, a passed
// deadline) does not interrupt its statements. SQLite rolls back the whole
// transaction when a write is interrupted, so an interrupted lease renewal
// used to take the approvals and consumes batched with it down too ("no
// such savepoint: w" under load, an approved call refused at dispatch).
func TestGroupedWriteIgnoresCallerCancellation(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	if db.batch == nil {
		t.Fatal("the SQLite store has no batcher")
	}
	ctx, cancel := context.WithCancel(t.Context())
	err := db.inTx(ctx, func(tx *tx) error {
		if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS grouped_probe (x INTEGER)`); err != nil {
			return err
		}
		cancel() // the caller goes away while its function runs
		_, err := tx.exec(ctx, `INSERT INTO grouped_probe (x) VALUES (1)`)
		return err
	})
	if err != nil {
		t.Fatalf("a grouped write whose caller went away mid-function = %v, want it to run and commit", err)
	}
	var n int
	if err := db.sql.QueryRowContext(t.Context(), `SELECT count(*) FROM grouped_probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("rows after the commit = %d, want 1", n)
	}
}
