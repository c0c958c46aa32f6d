package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

func postgresConfig(dsn string) Config { return Config{Driver: DriverPostgres, DSN: dsn} }

// TestFeedTailMissesNothing writes from two instances while a reader tails
// the log with Feed: the tail sees every event exactly once.
func TestFeedTailMissesNothing(t *testing.T) {
	cfg := postgresConfig(pgtest.Fresh(t))
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
		after  store.Cursor
	)
	read := func() {
		evs, next, err := dbs[0].Feed(t.Context(), after, 7)
		if err != nil {
			t.Fatalf("Feed = %v", err)
		}
		tailed = append(tailed, seqs(evs)...)
		after = next
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		read()
	}
	// The last commits show once every transaction older than them ended
	// (anywhere in the cluster): read until all are there.
	for deadline := time.Now().Add(30 * time.Second); len(tailed) < writers*perWriter && time.Now().Before(deadline); {
		read()
	}
	all, err := dbs[1].Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := seqs(all)
	if len(want) != writers*perWriter {
		t.Fatalf("%d events, want %d", len(want), writers*perWriter)
	}
	slices.Sort(tailed)
	if !slices.Equal(tailed, want) {
		t.Errorf("tailing saw %d events, the log has %d: a late commit was skipped or one seen twice", len(tailed), len(want))
	}
}

// TestFeedOrdersByTransactionNumber gives two events transaction ids whose
// decimal text sorts the other way ("10" < "9"): the feed and its end must
// follow the numbers. (The feed once sorted by the text form and, once the
// cluster's ids crossed 999 → 1000, skipped and repeated events.)
func TestFeedOrdersByTransactionNumber(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	for i := range 2 {
		if err := db.CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
			t.Fatal(err)
		}
	}
	all, err := db.Events(ctx, 0, 0)
	if err != nil || len(all) != 2 {
		t.Fatalf("Events = %v, %v; want two", all, err)
	}
	for i, xid := range []string{"10", "9"} {
		if _, err := db.sql.ExecContext(ctx, `UPDATE events SET xid = $1::xid8 WHERE seq = $2`, xid, all[i].Seq); err != nil {
			t.Fatal(err)
		}
	}
	evs, next, err := db.Feed(ctx, store.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqs(evs), []int64{all[1].Seq, all[0].Seq}; !slices.Equal(got, want) {
		t.Errorf("Feed order = %v, want %v (transaction 9 before 10)", got, want)
	}
	if want := (store.Cursor{Tx: 10, Seq: all[0].Seq}); next != want {
		t.Errorf("Feed cursor = %v, want %v", next, want)
	}
	if end, err := db.FeedEnd(ctx); err != nil || end != (store.Cursor{Tx: 10, Seq: all[0].Seq}) {
		t.Errorf("FeedEnd = %v, %v; want 10.%d", end, err, all[0].Seq)
	}
	if evs, _, err := db.Feed(ctx, store.Cursor{Tx: 9, Seq: all[1].Seq}, 0); err != nil || !slices.Equal(seqs(evs), []int64{all[0].Seq}) {
		t.Errorf("Feed after 9.%d = %v, %v; want only the event of transaction 10", all[1].Seq, seqs(evs), err)
	}
}

func seqs(evs []approval.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

// TestFeedNeverSkipsALateCommit holds a transaction open after it took a
// sequence number while another, with a higher sequence number, commits:
// the reader must not pass the open one. Two orders: the open transaction
// got its transaction id first (the feed waits for it), or last (the feed
// returns the committed one first and the late one after it). Paging by
// Seq alone would skip the late event in the second order.
func TestFeedNeverSkipsALateCommit(t *testing.T) {
	for _, lateGetsXIDFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("late transaction id first %v", lateGetsXIDFirst), func(t *testing.T) {
			db := openTest(t, postgresConfig(pgtest.Fresh(t)))
			ctx := t.Context()
			if err := db.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
				t.Fatal(err)
			}
			// The creation's event becomes final once every transaction
			// older than it, in the whole cluster, has ended (feedSafe): other
			// tests' databases share the cluster and may hold one open for a
			// moment. Start after it, so the feed read below holds only this
			// test's two events.
			var (
				start store.Cursor
				err   error
			)
			for deadline := time.Now().Add(30 * time.Second); start == (store.Cursor{}); {
				if start, err = db.FeedEnd(ctx); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("the creation's event did not become final in 30 s")
				}
			}
			late, err := db.sql.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = late.Rollback() }()
			early, err := db.sql.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = early.Rollback() }()
			insert := func(x *sql.Tx, actor string) {
				t.Helper()
				if _, err := x.ExecContext(ctx, `INSERT INTO events (request_id, type, state, actor, at) VALUES ($1, 'reviewed', 'pending', $2, 0)`,
					string(testID(1)), actor); err != nil {
					t.Fatal(err)
				}
			}
			takeXID := func(x *sql.Tx) {
				t.Helper()
				if _, err := x.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
					t.Fatal(err)
				}
			}
			if lateGetsXIDFirst {
				takeXID(late)
				takeXID(early)
			} else {
				takeXID(early)
				takeXID(late)
			}
			insert(late, "late")   // the lower seq
			insert(early, "early") // the higher seq
			if err := early.Commit(); err != nil {
				t.Fatal(err)
			}

			var got []string
			cur := start
			read := func() {
				t.Helper()
				evs, next, err := db.Feed(ctx, cur, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					got = append(got, ev.Actor)
				}
				cur = next
			}
			read()
			if err := late.Commit(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
				read()
			}
			want := []string{"early", "late"}
			if lateGetsXIDFirst {
				want = []string{"late", "early"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("feed returned %q, want %q: every event once, in the order of the transaction ids", got, want)
			}
		})
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
			dsn, err := pgtest.WithDatabase(pgtest.DSN(t), "tg_does_not_exist")
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

// TestFanOutNeverSkipsALateCommit: the notification outbox's fan-out
// follows the change feed, so an event whose transaction took a lower seq
// but commits after one with a higher seq is still fanned out (a cursor
// over seqs, as the outbox had while event writers were serialized by a
// lock, moves past it for good).
func TestFanOutNeverSkipsALateCommit(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	if err := db.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	every := func(approval.Event, approval.Request) []string { return []string{"a"} }
	newID := seqIDs()
	fanOut := func() {
		t.Helper()
		if _, err := db.FanOut(ctx, 0, t0, every, newID); err != nil {
			t.Fatal(err)
		}
	}
	fanOut() // the creation
	commitLate(t, db, testID(1), fanOut)
	actors := func() []string {
		ds, err := db.Deliveries(ctx, "a", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.Event.Actor)
		}
		slices.Sort(out)
		return out
	}
	// The late event shows once every older transaction in the cluster
	// ended; fan out until it is there (or give up).
	want := []string{"desktop", "early", "late"} // the creation by its requester, then the two
	for deadline := time.Now().Add(30 * time.Second); len(actors()) < len(want) && time.Now().Before(deadline); {
		fanOut()
	}
	if got := actors(); !slices.Equal(got, want) {
		t.Errorf("deliveries of events by %q, want %q: each event once, the late commit too", got, want)
	}
	if pos, _, err := db.FeedPosition(ctx, store.FeedConsumerNotify); err != nil {
		t.Errorf("FeedPosition = %v", err)
	} else if end, err := db.FeedEnd(ctx); err != nil || pos != end {
		t.Errorf("outbox position %v, feed end %v (%v): want the end", pos, end, err)
	}
}

// commitLate stages a late commit on Postgres: two transactions each add a
// "reviewed" event of request id; the one that took the lower seq
// commits last, and between runs after the other committed. A reader of
// the log by seq that ran in between moves past the lower seq for good.
func commitLate(t *testing.T, db *DB, id approval.ID, between func()) {
	t.Helper()
	ctx := t.Context()
	late, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback() }()
	early, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = early.Rollback() }()
	insert := func(x *sql.Tx, actor string) {
		t.Helper()
		if _, err := x.ExecContext(ctx, `INSERT INTO events (request_id, type, state, actor, at) VALUES ($1, 'reviewed', 'pending', $2, 0)`,
			string(id), actor); err != nil {
			t.Fatal(err)
		}
	}
	insert(late, "late")   // the lower seq
	insert(early, "early") // the higher seq, committed first
	if err := early.Commit(); err != nil {
		t.Fatal(err)
	}
	between()
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
}
