package sqlstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestPostgresNotifiesAfterTheCommit: every write that announces a change
// (a creation, a decision and a consume through the pipelined write, the
// dispatch outcome's one statement, a policy revision through a general
// transaction) no longer runs pg_notify in its own transaction, where its
// commit took the cluster-wide notify lock (approve44): the notification
// comes from the backend of the store's notifier connection
// (NotifyApplicationName), not from the one that committed the change, and
// a watch on another instance wakes on it.
func TestPostgresNotifiesAfterTheCommit(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a, b := openTest(t, noPoll(dsn)), openTest(t, noPoll(dsn))
	w := startWatch(t, a)
	w.expect(t, "after connecting", "")
	ln, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close(context.Background()) })
	if _, err := ln.Exec(t.Context(), `LISTEN `+pgx.Identifier{Channel}.Sanitize()+`; LISTEN `+pgx.Identifier{PolicyChannel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// sender waits for the next notification whose payload starts with
	// head and returns the application_name of the backend that sent it.
	sender := func(what, head string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard
		defer cancel()
		for {
			n, err := ln.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("no notification %s: %v", what, err)
			}
			if !strings.HasPrefix(n.Payload, head) {
				continue
			}
			var app string
			if err := ln.QueryRow(ctx, `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, n.PID).Scan(&app); err != nil {
				t.Fatalf("the backend of the notification %s (pid %d): %v", what, n.PID, err)
			}
			return app
		}
	}
	id := testID(1)
	steps := []struct {
		name  string
		do    func(context.Context) error
		wakes bool // a's watch reports id (a creation wakes nobody)
	}{
		{"create", func(ctx context.Context) error { return b.CreateRequest(ctx, pendingRequest(id)) }, false},
		{"approve", func(ctx context.Context) error {
			_, err := b.UpdateRequest(ctx, id, "bob", approveFn)
			return err
		}, true},
		{"consume", func(ctx context.Context) error {
			_, err := b.UpdateRequest(ctx, id, "gw-b", func(r *approval.Request) error {
				return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
			})
			return err
		}, true},
		{"record the outcome", func(ctx context.Context) error {
			return b.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "gw-b")
		}, true},
	}
	for _, s := range steps {
		if err := s.do(t.Context()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if app := sender("after "+s.name, string(id)); app != NotifyApplicationName {
			t.Errorf("the notification of %s came from a backend of application_name %q; want %q (sent after the commit, not in it)", s.name, app, NotifyApplicationName)
		}
		if s.wakes {
			w.expect(t, "after "+s.name, id)
		}
	}
	if _, err := b.AppendPolicy(t.Context(), 0, store.PolicyRevision{Policy: "default: deny\n", Digest: "sha256:01", CreatedAt: t0}, "ops-admin"); err != nil {
		t.Fatal(err)
	}
	if app := sender("after a policy revision", "1"); app != NotifyApplicationName {
		t.Errorf("the notification of a policy revision came from a backend of application_name %q; want %q", app, NotifyApplicationName)
	}
}

// TestPostgresLostNotificationIsPolled: a notification whose send failed
// (the notifier's connection down, a crash between the commit and the
// send) is not retried; the watch of another instance still reports the
// decision, from the change feed at its safety poll.
func TestPostgresLostNotificationIsPolled(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a := openTest(t, Config{Driver: DriverPostgres, DSN: dsn, Poll: 20 * time.Millisecond})
	b := openTest(t, noPoll(dsn))
	id := testID(1)
	if err := b.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	notes := b.d.(*postgresDialect).notes
	notes.mu.Lock()
	notes.send = func(context.Context, []notice) error {
		failed.Add(1)
		return errors.New("notify: connection refused")
	}
	notes.mu.Unlock()
	w := startWatch(t, a)
	w.expect(t, "after connecting", "")
	if _, err := b.UpdateRequest(t.Context(), id, "bob", approveFn); err != nil {
		t.Fatal(err)
	}
	w.expectAmong(t, "after a decision whose notification was lost", id)
	notesSent(b) // the poll may come first: the failed send may still be on its way
	if failed.Load() == 0 {
		t.Fatal("the decision's notification was never sent (and so not lost)")
	}
}

// TestNotifierGathersWhileSending: notices handed to the notifier while a
// send is in flight go out together in the next one, and the first goes
// out at once (no wait for company).
func TestNotifierGathersWhileSending(t *testing.T) {
	n := newPGNotifier(nil)
	var (
		mu      sync.Mutex
		batches [][]notice
	)
	entered, release := make(chan struct{}), make(chan struct{})
	n.send = func(_ context.Context, b []notice) error {
		mu.Lock()
		first := len(batches) == 0
		batches = append(batches, append([]notice(nil), b...))
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		return nil
	}
	n.notify([]notice{{Channel, "1"}})
	<-entered // sent alone, at once
	for _, p := range []string{"2", "3", "4"} {
		n.notify([]notice{{Channel, p}})
	}
	close(release)
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.wg.Wait()
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 3 {
		t.Fatalf("batches sent = %v; want [1] then [2 3 4]", batches)
	}
}

// notesSent returns once db's notifier sent what it was given so far
// (Postgres; nothing on SQLite): notifications of writes that returned
// come after it, to a LISTEN made after it, no more. Nothing else may
// write through db meanwhile.
func notesSent(db *DB) {
	if pg, ok := db.d.(*postgresDialect); ok {
		pg.notes.wg.Wait()
	}
}
