package sqlstore

import (
	"errors"
	"path/filepath"
	"testing"

	"toolgate/internal/approval"
)

// TestBatchedReadsReuseTheirRow: a request row read in one of SQLite's
// batched write transactions (a decision's or a consume's locked read) is
// scanned into the batcher's row, not into a row and 34 destinations made
// on the heap for each read (≈ 1 KB per read: alloc41), and each read
// still returns its own row.
//
// The test checks the reuse itself (the transaction's scanner and its
// destinations stay the same from read to read) rather than comparing
// allocation counts: the driver's own allocations per query vary by one or
// two from run to run, as many as the reuse saves (CI on 7fa73730 read 118
// against 119). The closure may run on the batcher's goroutine, so it
// reports by its error and t.Error only.
func TestBatchedReadsReuseTheirRow(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "tg.db")))
	ids := []string{string(testID(1)), string(testID(2))}
	for _, id := range ids {
		if err := db.CreateRequest(t.Context(), pendingRequest(approval.ID(id))); err != nil {
			t.Fatal(err)
		}
	}
	err := db.inTx(t.Context(), func(tx *tx) error {
		if tx.rows == nil {
			return errors.New("a batched write transaction carries no request scanner")
		}
		a, err := getRequestRow(t.Context(), tx, testID(1), "")
		if err != nil {
			return err
		}
		if len(tx.rows.dest) == 0 {
			return errors.New("the read did not scan into the transaction's scanner")
		}
		scanner, first := tx.rows, &tx.rows.dest[0]
		b, err := getRequestRow(t.Context(), tx, testID(2), "")
		if err != nil {
			return err
		}
		if tx.rows != scanner || &tx.rows.dest[0] != first {
			t.Error("the second read made a new scanner or new destinations")
		}
		if a.id != ids[0] || b.id != ids[1] {
			t.Errorf("read %s and %s, want %s and %s: a read's row is overwritten by the next", a.id, b.id, ids[0], ids[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
