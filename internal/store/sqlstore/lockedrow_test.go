package sqlstore

import (
	"path/filepath"
	"testing"

	"toolgate/internal/approval"
)

// TestBatchedReadsReuseTheirRow: a request row read in one of SQLite's
// batched write transactions (a decision's or a consume's locked read) is
// scanned into the batcher's row, not into a row and 34 destinations made
// on the heap for each read (≈ 1 KB per read: alloc41), and each read
// still returns its own row.
func TestBatchedReadsReuseTheirRow(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "tg.db")))
	ids := []string{string(testID(1)), string(testID(2))}
	for _, id := range ids {
		if err := db.CreateRequest(t.Context(), pendingRequest(approval.ID(id))); err != nil {
			t.Fatal(err)
		}
	}
	var inBatch, alone float64
	err := db.inTx(t.Context(), func(tx *tx) error {
		a, err := getRequestRow(t.Context(), tx, testID(1), "")
		if err != nil {
			return err
		}
		b, err := getRequestRow(t.Context(), tx, testID(2), "")
		if err != nil {
			return err
		}
		if a.id != ids[0] || b.id != ids[1] {
			t.Errorf("read %s and %s, want %s and %s", a.id, b.id, ids[0], ids[1])
		}
		inBatch = testing.AllocsPerRun(50, func() { _, _ = getRequestRow(t.Context(), tx, testID(1), "") })
		alone = testing.AllocsPerRun(50, func() { _, _ = getRequestRow(t.Context(), db, testID(1), "") })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocations per read: %v in a batched transaction, %v outside any", inBatch, alone)
	if inBatch > alone-2 {
		t.Errorf("a read in a batched transaction made %v allocations, one outside any %v: want at least the row and its destinations fewer", inBatch, alone)
	}
}
