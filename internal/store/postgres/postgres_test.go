package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/storetest"
)

// testDSN returns the DSN of the throwaway Postgres in
// TOOLGATE_TEST_POSTGRES, skipping the test when it is not set (failing
// instead when TOOLGATE_REQUIRE_POSTGRES=1). The role needs CREATEDB.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("TOOLGATE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("TOOLGATE_REQUIRE_POSTGRES") == "1" {
			t.Fatal("TOOLGATE_TEST_POSTGRES is not set")
		}
		t.Skip("set TOOLGATE_TEST_POSTGRES to run")
	}
	return dsn
}

// freshDatabase creates an empty database next to the one dsn names,
// drops it when the test ends, and returns its DSN.
func freshDatabase(t *testing.T) string {
	t.Helper()
	dsn := testDSN(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "tg_" + hex.EncodeToString(b[:])
	admin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := admin(t.Context(), `CREATE DATABASE `+ident); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	out, err := withDatabase(dsn, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withDatabase returns dsn (a URL or key=value string) naming database name.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse TOOLGATE_TEST_POSTGRES: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later keyword wins
}

// openTest opens dsn and closes it when the test ends.
func openTest(t *testing.T, dsn string, opts *Options) *DB {
	t.Helper()
	db, err := Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return db
}

func TestConformance(t *testing.T) {
	testDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, freshDatabase(t), nil)
	})
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

// TestTwoInstancesDecideExactlyOnce races 8 decisions through two *DB on
// one database, as two gateway instances would.
func TestTwoInstancesDecideExactlyOnce(t *testing.T) {
	dsn := freshDatabase(t)
	dbs := []*DB{openTest(t, dsn, nil), openTest(t, dsn, nil)}
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
}

// TestEventsTailMissesNothing writes from two instances while a reader
// tails the log with Events(after): since sequence numbers follow commit
// order, the tail sees every event exactly once.
func TestEventsTailMissesNothing(t *testing.T) {
	dsn := freshDatabase(t)
	dbs := []*DB{openTest(t, dsn, nil), openTest(t, dsn, nil)}
	const writers, perWriter = 4, 25
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if err := dbs[w%2].CreateRequest(t.Context(), pendingRequest(testID(w*perWriter+i))); err != nil {
					t.Errorf("CreateRequest = %v", err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	var (
		tailed []int64
		after  int64
	)
	read := func() {
		evs, err := dbs[0].Events(t.Context(), after, 7)
		if err != nil {
			t.Fatalf("Events = %v", err)
		}
		for _, ev := range evs {
			tailed = append(tailed, ev.Seq)
			after = ev.Seq
		}
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		read()
	}
	for n := -1; n != len(tailed); {
		n = len(tailed)
		read()
	}
	all, err := dbs[1].Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, ev := range all {
		want = append(want, ev.Seq)
	}
	if len(want) != writers*perWriter {
		t.Fatalf("%d events, want %d", len(want), writers*perWriter)
	}
	if !slices.Equal(tailed, want) {
		t.Errorf("tailing saw %d events, the log has %d: a late commit was skipped", len(tailed), len(want))
	}
}

// TestOpenConcurrently opens one new database from several goroutines at
// once, as instances starting together would: each migration applies once.
func TestOpenConcurrently(t *testing.T) {
	dsn := freshDatabase(t)
	var wg sync.WaitGroup
	dbs := make([]*DB, 4)
	for i := range dbs {
		wg.Go(func() {
			db, err := Open(t.Context(), dsn, nil)
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
			t.Cleanup(func() { db.Close() })
		}
	}
	if t.Failed() {
		return
	}
	checkMigrations(t, dbs[0])
}

// checkMigrations checks that schema_migrations lists each embedded
// migration once.
func checkMigrations(t *testing.T, db *DB) {
	t.Helper()
	rows, err := db.pool.Query(t.Context(), `SELECT name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
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
	dsn := freshDatabase(t)
	db, err := Open(t.Context(), dsn, nil)
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
	db = openTest(t, dsn, nil)
	got, err := db.GetRequest(t.Context(), r.ID)
	if err != nil || !got.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("after reopening: GetRequest = %+v, %v", got, err)
	}
	checkMigrations(t, db)
}

// TestArgumentsByteForByte stores display copies that a JSON-aware column
// type would re-encode and expects every byte back.
func TestArgumentsByteForByte(t *testing.T) {
	db := openTest(t, freshDatabase(t), nil)
	tests := []struct {
		name, args string
	}{
		{"escapes", `{"s":"\u00e9\/\u0000\ud83d\ude00","t":"\"\\"}`},
		{"duplicate-looking keys and order", `{"b":1,"a":2,"B":3}`},
		{"number literals", `{"n":[1.0,1e0,-0,12345678901234567890123]}`},
		{"whitespace", "{ \"a\" :\t[ 1 ,\n2 ] }"},
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
}

func TestOpenRefuses(t *testing.T) {
	// A port nothing listens on: bind one, then free it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()

	tests := []struct {
		name            string
		dsn             func(t *testing.T) string
		wantUnavailable bool
	}{
		{"malformed dsn", func(*testing.T) string { return "postgres://%zz" }, false},
		{"unknown option", func(*testing.T) string { return "postgres://u@127.0.0.1/db?pool_max_conns=many" }, false},
		{"nothing listening", func(*testing.T) string {
			return "postgres://u:secret@" + deadAddr + "/db?sslmode=disable&connect_timeout=5"
		}, true},
		{"newer schema", func(t *testing.T) string {
			dsn := freshDatabase(t)
			db := openTest(t, dsn, nil)
			if _, err := db.pool.Exec(t.Context(), `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)`); err != nil {
				t.Fatal(err)
			}
			return dsn
		}, false},
		{"missing database", func(t *testing.T) string {
			dsn, err := withDatabase(testDSN(t), "tg_does_not_exist")
			if err != nil {
				t.Fatal(err)
			}
			return dsn
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dsn := tc.dsn(t)
			db, err := Open(t.Context(), dsn, nil)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if got := errors.Is(err, store.ErrUnavailable); got != tc.wantUnavailable {
				t.Errorf("Open = %v; errors.Is(ErrUnavailable) = %v, want %v", err, got, tc.wantUnavailable)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("Open error shows the password: %v", err)
			}
		})
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	db, err := Open(t.Context(), freshDatabase(t), nil)
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
	}
	for _, c := range calls {
		if err := c.call(t.Context()); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want ErrUnavailable", c.name, err)
		}
	}
}

// TestAnsweredAtRoundTrip answers a denial through UpdateRequest and reads
// AnsweredAt back in UTC, truncated to the millisecond; a second answer is
// refused and writes nothing.
func TestAnsweredAtRoundTrip(t *testing.T) {
	db := openTest(t, freshDatabase(t), nil)
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
}
