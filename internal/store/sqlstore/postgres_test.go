package sqlstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"toolgate/internal/store"
)

func postgresConfig(dsn string) Config { return Config{Driver: DriverPostgres, DSN: dsn} }

// TestEventsTailMissesNothing writes from two instances while a reader
// tails the log with Events(after): since sequence numbers follow commit
// order, the tail sees every event exactly once.
func TestEventsTailMissesNothing(t *testing.T) {
	cfg := postgresConfig(freshDatabase(t))
	dbs := []*DB{openTest(t, cfg), openTest(t, cfg)}
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

func TestOpenPostgresRefuses(t *testing.T) {
	// A port nothing listens on: bind one, then free it.
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}

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
		{"missing database", func(t *testing.T) string {
			t.Helper()
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
			db, err := Open(t.Context(), postgresConfig(dsn))
			if err == nil {
				_ = db.Close()
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

func TestIsUnavailable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"read-only standby", &pgconn.PgError{Code: "25006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"unexpected EOF", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"connection reset", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{"closed connection", net.ErrClosed, true},
		{"plain error", errors.New("decode reviews: bad json"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&postgresDialect{}).unavailable(tc.err); got != tc.want {
				t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
