package sqlstore

import (
	"path/filepath"
	"testing"
	"time"
)

// TestRenewalsOfEveryLengthLeaveTheStatementCacheRoom: renewing lists of
// every length from 1 to 100 (what a gateway whose held calls come and go
// does) prepares a few statements, not one per length. Written with one
// mark per id, renewals alone filled SQLite's cache (maxStmts) after a few
// hundred lengths, and every new statement after them ran unprepared for
// good.
func TestRenewalsOfEveryLengthLeaveTheStatementCacheRoom(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "tg.db")))
	ns := make([]int, 100)
	for i := range ns {
		ns[i] = i + 1
	}
	ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), ns...)
	for n := 1; n <= len(ids); n++ {
		// Every other renewal names fewer ids than the last, so both the
		// unmarking and the marking statement run with lists of many lengths.
		names := ids[:n]
		if n%2 == 0 {
			names = ids[:n/2]
		}
		if _, err := db.RenewLeases(t.Context(), "gw-a", names, t0.Add(time.Duration(n+1)*time.Minute)); err != nil {
			t.Fatalf("renewal %d: %v", n, err)
		}
	}
	db.wcache.mu.Lock()
	cached := len(db.wcache.m)
	db.wcache.mu.Unlock()
	// Seven list sizes (1, 2, 4, …, 64, 128) for each of the two
	// statements, plus the renewal's fixed ones.
	if cached > 24 {
		t.Fatalf("after 100 renewals the write statement cache holds %d statements (at most %d fit)", cached, maxStmts)
	}
}
