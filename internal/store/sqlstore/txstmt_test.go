package sqlstore

import (
	"path/filepath"
	"testing"
)

// TestTxMakesEachStatementOnce: a write transaction makes its statement
// of a cached query once and reuses it for the query's later runs in the
// same transaction (a batch runs the same few statements for each of its
// writes: sql.Tx.StmtContext on every run was ≈ 1.8 KB per approval in
// approve-all, alloc41); the statements run and the transaction commits.
func TestTxMakesEachStatementOnce(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "tg.db")))
	const q = `SELECT count(*) FROM requests WHERE state = ?`
	err := db.txOnce(t.Context(), db.wsql, func(tx *tx) error {
		first := tx.stmt(t.Context(), q)
		if first == nil {
			t.Fatal("no statement from the cache")
		}
		for range 3 {
			var n int
			if err := tx.queryRow(t.Context(), q, "pending").Scan(&n); err != nil {
				return err
			}
			if s := tx.stmt(t.Context(), q); s != first {
				t.Errorf("run again: another transaction statement %p, want %p", s, first)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
