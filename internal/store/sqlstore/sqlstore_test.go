package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/storetest"
)

// A backend makes fresh databases of one dialect for tests.
type backend struct {
	driver string
	// fresh returns the Config of a new, empty database that is removed
	// when the test ends. For Postgres it skips the test when
	// TOOLGATE_TEST_POSTGRES is not set, or fails it when
	// TOOLGATE_REQUIRE_POSTGRES=1.
	fresh func(tb testing.TB) Config
}

var backends = []backend{
	{DriverSQLite, func(tb testing.TB) Config {
		tb.Helper()
		return Config{Driver: DriverSQLite, Path: filepath.Join(tb.TempDir(), "toolgate.db")}
	}},
	{DriverPostgres, func(tb testing.TB) Config {
		tb.Helper()
		return Config{Driver: DriverPostgres, DSN: pgtest.Fresh(tb)}
	}},
}

// openTest opens cfg and closes it when the test ends.
func openTest(tb testing.TB, cfg Config) *DB {
	tb.Helper()
	db, err := Open(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("Open(%s) = %v", cfg.Driver, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("Close = %v", err)
		}
	})
	return db
}

// TestConformance runs the store conformance suite, unchanged, against
// both dialects of the one store.
func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			if b.driver == DriverPostgres {
				pgtest.DSN(t) // skip (or fail) before the parallel subtests start
			}
			storetest.Run(t, func(t *testing.T) store.Store {
				t.Helper()
				return openTest(t, b.fresh(t))
			})
		})
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pendingRequest(id approval.ID) approval.Request {
	return approval.Request{
		ID: id, State: approval.StatePending, Server: "pay", Tool: "transfer",
		Arguments: []byte(`{"to":"acct-9","amount":12}`), ArgumentsHash: "sha256:00", RequestedBy: "desktop",
		Tenant: "acme", CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute), RequiredApprovals: 1, ValidFor: 10 * time.Minute,
	}
}

func testID(n int) approval.ID {
	return approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", n))
}

// TestTwoHandlesDecideExactlyOnce races 8 decisions through two *DB on one
// database, as two gateway processes (SQLite) or instances (Postgres)
// sharing it would.
func TestTwoHandlesDecideExactlyOnce(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			dbs := []*DB{openTest(t, cfg), openTest(t, cfg)}
			r := pendingRequest(testID(1))
			if err := dbs[0].CreateRequest(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			var (
				mu      sync.Mutex
				winners []string
				start   = make(chan struct{})
				wg      sync.WaitGroup
			)
			for i := range 8 {
				db, name := dbs[i%2], fmt.Sprint("rev", i)
				v := approval.VerdictApprove
				if i%3 == 0 {
					v = approval.VerdictDeny
				}
				wg.Go(func() {
					<-start
					_, err := db.UpdateRequest(t.Context(), r.ID, name, func(cur *approval.Request) error {
						return cur.Review(approval.Reviewer{ID: name}, v, "", "", t0.Add(time.Minute))
					})
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, name)
						mu.Unlock()
					case !errors.Is(err, approval.ErrResolved) && !errors.Is(err, approval.ErrConflict):
						t.Errorf("review by %s = %v", name, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("%d winners %v, want 1", len(winners), winners)
			}
			got, err := dbs[1].GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.DecidedBy != winners[0] || len(got.Reviews) != 1 {
				t.Errorf("decided by %q with %d reviews, want %q with 1", got.DecidedBy, len(got.Reviews), winners[0])
			}
			evs, err := dbs[0].Events(t.Context(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 3 {
				t.Errorf("events = %+v, want requested, reviewed and one decision", evs)
			}
		})
	}
}

// checkMigrations checks that schema_migrations lists each embedded
// migration of db's dialect once, in order.
func checkMigrations(t *testing.T, db *DB) {
	t.Helper()
	rows, err := db.sql.QueryContext(t.Context(), `SELECT name FROM schema_migrations ORDER BY version`)
	got, err := collect(rows, err, func(rows *sql.Rows) (string, error) {
		var s string
		return s, rows.Scan(&s)
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations(db.Driver())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range ms {
		want = append(want, m.name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("schema_migrations = %v, want %v", got, want)
	}
}

// TestReopen keeps the data across a restart (case C13) and applies no
// migration twice.
func TestReopen(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			db, err := Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := pendingRequest(testID(1))
			if err := db.CreateRequest(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, cfg)
			got, err := db.GetRequest(t.Context(), r.ID)
			if err != nil || !got.ExpiresAt.Equal(r.ExpiresAt) {
				t.Errorf("after reopening: GetRequest = %+v, %v", got, err)
			}
			checkMigrations(t, db)
		})
	}
}

// TestOpenConcurrently opens one new database from several goroutines at
// once, as processes or instances starting together would: each migration
// applies once.
func TestOpenConcurrently(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			var wg sync.WaitGroup
			dbs := make([]*DB, 4)
			for i := range dbs {
				wg.Go(func() {
					db, err := Open(t.Context(), cfg)
					if err != nil {
						t.Errorf("Open = %v", err)
						return
					}
					dbs[i] = db
				})
			}
			wg.Wait()
			for _, db := range dbs {
				if db != nil {
					t.Cleanup(func() { _ = db.Close() })
				}
			}
			if t.Failed() {
				return
			}
			checkMigrations(t, dbs[0])
		})
	}
}

// TestArgumentsByteForByte stores display copies that a JSON-aware column
// type would re-encode and expects every byte back.
func TestArgumentsByteForByte(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			tests := []struct {
				name, args string
			}{
				{"escapes", `{"s":"\u00e9\/\u0000\ud83d\ude00","t":"\"\\"}`},
				{"duplicate-looking keys and order", `{"b":1,"a":2,"B":3}`},
				{"number literals", `{"n":[1.0,1e0,-0,12345678901234567890123]}`},
				{"whitespace", "{ \"a\" :\t[ 1 ,\n2 ] }"},
				{"question marks and dollars", `{"q":"? $1 '?' \"?\" -- ?"}`},
				{"empty object", `{}`},
			}
			for i, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r := pendingRequest(testID(i))
					r.Arguments = json.RawMessage(tc.args)
					if err := db.CreateRequest(t.Context(), r); err != nil {
						t.Fatal(err)
					}
					got, err := db.GetRequest(t.Context(), r.ID)
					if err != nil {
						t.Fatal(err)
					}
					if string(got.Arguments) != tc.args {
						t.Errorf("Arguments = %q, want %q", got.Arguments, tc.args)
					}
				})
			}
		})
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db, err := Open(t.Context(), b.fresh(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			id := testID(1)
			calls := []struct {
				name string
				call func(context.Context) error
			}{
				{"Ping", db.Ping},
				{"GetRequest", func(ctx context.Context) error { _, err := db.GetRequest(ctx, id); return err }},
				{"CreateRequest", func(ctx context.Context) error { return db.CreateRequest(ctx, pendingRequest(id)) }},
				{"UpdateRequest", func(ctx context.Context) error {
					_, err := db.UpdateRequest(ctx, id, "bob", func(*approval.Request) error { return nil })
					return err
				}},
				{"ListRequests", func(ctx context.Context) error { _, _, err := db.ListRequests(ctx, store.Filter{}); return err }},
				{"Due", func(ctx context.Context) error { _, err := db.Due(ctx, t0, 0); return err }},
				{"CountPending", func(ctx context.Context) error { _, err := db.CountPending(ctx, ""); return err }},
				{"Events", func(ctx context.Context) error { _, err := db.Events(ctx, 0, 0); return err }},
				{"GetSession", func(ctx context.Context) error { _, err := db.GetSession(ctx, "s1"); return err }},
				{"CurrentPolicy", func(ctx context.Context) error { _, err := db.CurrentPolicy(ctx); return err }},
			}
			for _, c := range calls {
				if err := c.call(t.Context()); !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("%s after Close = %v, want ErrUnavailable", c.name, err)
				}
			}
		})
	}
}

// TestAnsweredAtRoundTrip answers a denial through UpdateRequest and reads
// AnsweredAt back in UTC, truncated to the millisecond; a second answer is
// refused and writes nothing.
func TestAnsweredAtRoundTrip(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			r := pendingRequest(testID(1))
			if err := db.CreateRequest(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			if _, err := db.UpdateRequest(t.Context(), r.ID, "bob", func(cur *approval.Request) error {
				return cur.Review(approval.Reviewer{ID: "bob"}, approval.VerdictDeny, "no", "", t0.Add(time.Minute))
			}); err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 3, 1, 17, 32, 0, 123456789, time.FixedZone("IST", 5*3600+30*60))
			want := time.Date(2026, 3, 1, 12, 2, 0, 123000000, time.UTC)
			updated, err := db.UpdateRequest(t.Context(), r.ID, "gw-1", func(cur *approval.Request) error { return cur.Answer(at) })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.UpdateRequest(t.Context(), r.ID, "gw-2", func(cur *approval.Request) error { return cur.Answer(at) }); !errors.Is(err, approval.ErrResolved) {
				t.Errorf("second Answer = %v, want ErrResolved", err)
			}
			got, err := db.GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what string
				at   time.Time
			}{{"UpdateRequest result", updated.AnsweredAt}, {"GetRequest", got.AnsweredAt}} {
				if !c.at.Equal(want) || c.at.Location() != time.UTC {
					t.Errorf("%s AnsweredAt = %v, want %v in UTC", c.what, c.at, want)
				}
			}
		})
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no driver", Config{Path: "x.db"}},
		{"unknown driver", Config{Driver: "mysql", DSN: "x"}},
		{"negative max conns", Config{Driver: DriverPostgres, DSN: "postgres://u@127.0.0.1/db", MaxConns: -1}},
		{"max conns past int32", Config{Driver: DriverPostgres, DSN: "postgres://u@127.0.0.1/db", MaxConns: 1 << 31}},
		{"negative poll", Config{Driver: DriverPostgres, DSN: "postgres://u@127.0.0.1/db", Poll: -time.Second}},
		{"negative watch interval", Config{Driver: DriverSQLite, Path: "x.db", WatchInterval: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.Context(), tc.cfg)
			if err == nil {
				_ = db.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Open = %v, wraps ErrUnavailable; a bad config is not an outage", err)
			}
		})
	}
}

// BenchmarkRequestLifecycle measures the store's work for one approved
// call: create, approve, consume and record the outcome (four write
// transactions), and one read, on each dialect.
func BenchmarkRequestLifecycle(b *testing.B) {
	for _, be := range backends {
		b.Run(be.driver, func(b *testing.B) {
			db := openTest(b, be.fresh(b))
			ctx := b.Context()
			n := 0
			for b.Loop() {
				n++
				r := pendingRequest(testID(n))
				if err := db.CreateRequest(ctx, r); err != nil {
					b.Fatal(err)
				}
				steps := []func(*approval.Request) error{
					func(r *approval.Request) error {
						return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
					},
					func(r *approval.Request) error { return r.Consume(r.Binding(), "", t0.Add(2*time.Minute)) },
					func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeOK) },
				}
				for _, fn := range steps {
					if _, err := db.UpdateRequest(ctx, r.ID, "bench", fn); err != nil {
						b.Fatal(err)
					}
				}
				if got, err := db.GetRequest(ctx, r.ID); err != nil || got.DispatchOutcome != approval.OutcomeOK {
					b.Fatalf("GetRequest = %+v, %v", got, err)
				}
			}
		})
	}
}

// BenchmarkCreateRequestCaps measures what checking the pending caps in the
// creating transaction costs: creating requests (each of its own
// principal) from 8 goroutines at once, without caps and with the
// per-principal and total caps (Postgres: two advisory locks, a bounded
// count and a read of the total per create; the total's lock serializes
// the creators of one database).
//
//	TOOLGATE_TEST_POSTGRES=… go test -run '^$' -bench CreateRequestCaps ./internal/store/sqlstore/
func BenchmarkCreateRequestCaps(b *testing.B) {
	for _, be := range backends {
		for _, withCaps := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/caps=%v", be.driver, withCaps), func(b *testing.B) {
				db := openTest(b, be.fresh(b))
				var n atomic.Int64
				b.SetParallelism(4) // 8 goroutines on 2 cores
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						r := pendingRequest(testID(int(i)))
						r.RequestedBy = fmt.Sprint("agent-", i)
						var caps []store.Cap
						if withCaps {
							caps = []store.Cap{
								{Scope: store.CapPrincipal, Key: r.RequestedBy, Limit: 1 << 30, Name: "per principal"},
								{Scope: store.CapTotal, Limit: 1 << 30, Name: "total"},
							}
						}
						if err := db.CreateRequest(b.Context(), r, caps...); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
