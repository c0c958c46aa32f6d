package sqlstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// BenchmarkPendingPage (list28): the inbox's read, the newest 100 of
// 10,000 pending requests (500-byte arguments) on SQLite, row by row
// (EachRequest). first-row-µs is how long the first row took: the time
// before a page can start.
func BenchmarkPendingPage(b *testing.B) {
	db := openTest(b, sqliteConfig(filepath.Join(b.TempDir(), "toolgate.db")))
	args := []byte(fmt.Sprintf(`{"a":%q}`, strings.Repeat("x", 500)))
	for i := range 10_000 {
		r := pendingRequest(approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012d", i+1)))
		r.Arguments = args
		if err := db.CreateRequest(b.Context(), r); err != nil {
			b.Fatal(err)
		}
	}
	f := store.Filter{State: approval.StatePending, Descending: true, Limit: 100}
	var first time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start, n := time.Now(), 0
		if _, err := db.EachRequest(b.Context(), f, func(approval.Request) error {
			if n++; n == 1 {
				first += time.Since(start)
			}
			return nil
		}); err != nil || n != 100 {
			b.Fatalf("%d rows, %v", n, err)
		}
	}
	b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-row-µs")
}
