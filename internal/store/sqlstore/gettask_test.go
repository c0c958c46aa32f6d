package sqlstore

import (
	"bytes"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestPostgresGetTaskAfterTheServerDroppedItsConnections: GetTask takes
// its connection without the pool's ping (pgGetTask); when the server
// closed the pool's connections meanwhile, the read finds its connection
// broken and is sent again on a pinged one. The task read back is the
// one written, a direct task's state and lease included (pgx scans them,
// not database/sql), and a missing task is store.ErrNotFound.
func TestPostgresGetTaskAfterTheServerDroppedItsConnections(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	want := store.Task{
		RequestID:  testID(1),
		Principal:  approval.Principal{ID: "session:abc", Kind: "agent", Tenant: "acme"},
		CreatedAt:  t0,
		ExpiresAt:  t0.Add(time.Hour),
		State:      store.TaskWorking,
		LeaseUntil: t0.Add(time.Minute),
	}
	if err := db.CreateTask(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetTask(t.Context(), want.RequestID); err != nil { // the pool has a connection to drop
		t.Fatal(err)
	}
	var n int
	if err := db.asql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1) AS k`, PoolApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no pool connection to terminate")
	}
	got, err := db.GetTask(t.Context(), want.RequestID)
	if err != nil {
		t.Fatalf("GetTask after the server closed the pool's connections: %v", err)
	}
	if diff := cmp.Diff(store.NormalizeTask(want), got); diff != "" {
		t.Errorf("GetTask (-want +got):\n%s", diff)
	}
	if _, err := db.GetTask(t.Context(), testID(2)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTask of no task = %v, want store.ErrNotFound", err)
	}
}

// TestPostgresGetTaskIsOneRoundTrip counts GetTask's turns between the
// store and the server (turnProxy): one, the read, on a connection the
// pool hands out without its ping. Through database/sql it was two (the
// ping, then the read); the REST API reads the task once per decision.
func TestPostgresGetTaskIsOneRoundTrip(t *testing.T) {
	p := newTurnProxy(t, pgtest.Fresh(t))
	db := openTest(t, postgresConfig(p.dsn))
	want := store.Task{RequestID: testID(1), Principal: approval.Principal{ID: "session:abc", Kind: "agent"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := db.CreateTask(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	for _, id := range []approval.ID{want.RequestID, testID(2)} {
		if _, err := db.GetTask(t.Context(), id); err != nil && !errors.Is(err, store.ErrNotFound) { // the statement prepared and cached
			t.Fatal(err)
		}
		before := p.count()
		_, err := db.GetTask(t.Context(), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if got := p.count() - before; got != 1 {
			t.Errorf("GetTask(%s) took %d round trips, want 1", id, got)
		}
	}
}

// turnProxy relays TCP connections to a Postgres server and counts turns:
// the times a client sends after the server last spoke (or first), i.e.
// round trips, summed over the connections of the store's main pool
// (application_name PoolApplicationName in the startup message). The
// notifier's, lease renewal's, admin's and watch's connections are relayed
// but not counted: the notifier sends a write's notification after its
// commit returned, so it could land in the next write's count (CI failed
// TestPostgresDecisionReadsItsTask with 3 turns for 2 once notify44 moved
// the sends there).
type turnProxy struct {
	dsn string
	mu  sync.Mutex
	n   int
}

// newTurnProxy starts a turnProxy in front of the server of dsn and sets
// p.dsn to dsn through it; it stops with the test.
func newTurnProxy(t *testing.T, dsn string) *turnProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &turnProxy{}
	var (
		wg    sync.WaitGroup
		cmu   sync.Mutex
		conns []net.Conn
	)
	to := u.Host
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				_ = c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, s)
			cmu.Unlock()
			var spoke sync.Mutex // guards serverSpoke
			serverSpoke := true
			// Whether the connection belongs to the main pool, known once
			// the client's startup message passed (only the client to
			// server goroutine reads them).
			known, counted := false, false
			wg.Go(func() { // server to client
				defer func() { _ = c.Close() }()
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						spoke.Lock()
						serverSpoke = true
						spoke.Unlock()
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() { // client to server
				defer func() { _ = s.Close() }()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						spoke.Lock()
						turn := serverSpoke
						serverSpoke = false
						spoke.Unlock()
						if !known && bytes.Contains(buf[:n], []byte("application_name\x00")) {
							known = true
							counted = bytes.Contains(buf[:n], []byte("application_name\x00"+PoolApplicationName+"\x00"))
						}
						if turn && counted {
							p.mu.Lock()
							p.n++
							p.mu.Unlock()
						}
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	return p
}

// count returns the turns so far.
func (p *turnProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
