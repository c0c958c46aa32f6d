package sqlstore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestSQLitePageCachesStaySmall admits 2,000 pending requests with 2 KB of
// arguments each (100 at a time, as a burst of held calls: ≈ 5 MB of
// pages, more than SQLite's default cache) and lists them all three times through
// the admin pool, as a reviewer's console (and the held-call benchmark)
// does, then reads every open connection's page cache (SQLite's
// SQLITE_DBSTATUS_CACHE_USED: the C heap it holds, outside the Go heap).
// Each must stay within 2 MiB: with SQLite's default cache_size (2,000
// KiB of pages, ≈ 2.8 MB as modernc's allocator rounds each page up) the
// admin connection's was 2,784 KiB, and up to nine connections each kept
// that much for as long as the process ran (docs/performance.md, "rss26").
func TestSQLitePageCachesStaySmall(t *testing.T) {
	ctx := t.Context()
	db := openTest(t, Config{Driver: DriverSQLite, Path: filepath.Join(t.TempDir(), "toolgate.db")})
	const n, writers = 2000, 100
	pad := strings.Repeat("x", 2000)
	ids := make(chan int)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range ids {
				r := pendingRequest(testID(i))
				r.Arguments = fmt.Appendf(nil, `{"i":%d,"tag":%q}`, i, pad)
				r.ArgumentsHash = fmt.Sprintf("sha256:%064x", i)
				r.ExpiresAt = r.CreatedAt.Add(24 * time.Hour)
				if err := db.CreateRequest(ctx, r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	if t.Failed() {
		return
	}
	for range 3 {
		listed, cursor := 0, ""
		for {
			rs, next, err := db.ListRequests(ctx, store.Filter{State: approval.StatePending, Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			listed += len(rs)
			if next == "" {
				break
			}
			cursor = next
		}
		if listed != n {
			t.Fatalf("listed %d pending requests, want %d", listed, n)
		}
	}
	const most = 2 << 20
	for name, pool := range map[string]*sql.DB{"read": db.sql, "write": db.wsql, "admin": db.asql} {
		var conns []*sql.Conn
		for range pool.Stats().OpenConnections { // each open connection once: none is handed back meanwhile
			c, err := pool.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if err := c.Raw(func(dc any) error {
				st, ok := dc.(sqlite.DBStatus)
				if !ok {
					return fmt.Errorf("driver connection %T has no Status", dc)
				}
				used, _, err := st.Status(sqlite.DBStatusCacheUsed, false)
				t.Logf("%s pool: a connection's page cache holds %d KiB", name, used>>10)
				if err == nil && used > most {
					t.Errorf("%s pool: a connection's page cache holds %d KiB, want at most %d KiB", name, used>>10, most>>10)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
}
