package cli_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestWatchRefusesACursorOfAnotherStore: watch --since with a cursor that
// is no position in this gateway's event log (one from another store's
// log, past this one's end, or of a Postgres store given to SQLite) fails
// with a message saying so and exit 1 (the server's 422), instead of
// silently waiting past events or replaying them (newuser4). A cursor of
// this log still starts the watch.
func TestWatchRefusesACursorOfAnotherStore(t *testing.T) {
	other := sqlitetest.Open(t) // the store the cursor was taken from: three events
	og := gate.New(other, &policy.Policy{Default: policy.Allow}, nil)
	r := request("01900000-0000-7000-8000-000000000001")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := other.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := og.Review(t.Context(), r.ID, approval.Principal{ID: "bob"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	end, err := other.FeedEnd(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	db := sqlitetest.Open(t) // this gateway's store: one event
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db}))
	t.Cleanup(srv.Close)
	if err := db.CreateRequest(t.Context(), request("01900000-0000-7000-8000-000000000002")); err != nil {
		t.Fatal(err)
	}
	own, err := db.FeedEnd(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	watch := func(t *testing.T, since string) (code int, stderr string, started bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errs := &lines{ch: make(chan string, 100)}
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(ctx, []string{"watch", "--since", since}, &lines{ch: make(chan string, 100)}, errs, func(k string) string {
				return map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: "bob-tok"}[k]
			})
		}()
		for {
			select {
			case code = <-done:
				for {
					select {
					case l := <-errs.ch:
						stderr += l + "\n"
					default:
						return code, stderr, false
					}
				}
			case l := <-errs.ch:
				stderr += l + "\n"
				if strings.Contains(l, "watching approvals") {
					cancel()
					<-done
					return 0, stderr, true
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("watch --since %s neither failed nor started; stderr %q", since, stderr)
			}
		}
	}

	for _, tc := range []struct{ name, since string }{
		{"past this log's end", end.String()},
		{"a Postgres cursor on SQLite", "7312.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr, started := watch(t, tc.since)
			if started {
				t.Fatalf("watch --since %s started (stderr %q); want it refused", tc.since, stderr)
			}
			if code != cli.ExitFailure || !strings.Contains(stderr, "422") || !strings.Contains(stderr, `since "`+tc.since+`" is not a position in this gateway's event log`) {
				t.Errorf("exit %d, stderr %q; want %d and a message saying the cursor is not of this log", code, stderr, cli.ExitFailure)
			}
		})
	}
	t.Run("a cursor of this log", func(t *testing.T) {
		if _, stderr, started := watch(t, own.String()); !started {
			t.Errorf("watch --since %s (this log's end) did not start: %q", own, stderr)
		}
	})
}

// TestWatchResumesAtAPrunedCursor: a cursor whose event retention pruned,
// even when every event was pruned, still starts the watch (the reader
// lost only pruned events), while one past the pruned end is refused.
func TestWatchResumesAtAPrunedCursor(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db}))
	t.Cleanup(srv.Close)
	r := request("01900000-0000-7000-8000-000000000001")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Review(t.Context(), r.ID, approval.Principal{ID: "bob"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	es, err := db.FeedEntries(t.Context(), store.Cursor{}, 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("feed: %d entries, %v", len(es), err)
	}
	pruned, err := db.Prune(t.Context(), store.Retention{Events: time.Minute}, time.Now().Add(time.Hour))
	if err != nil || pruned.Events != 3 {
		t.Fatalf("prune: %+v, %v; want the 3 events pruned", pruned, err)
	}
	env := func(k string) string { return map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: "bob-tok"}[k] }
	for _, c := range []store.Cursor{es[0].Cursor, es[2].Cursor} {
		ctx, cancel := context.WithCancel(t.Context())
		errs := &lines{ch: make(chan string, 100)}
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(ctx, []string{"watch", "--since", c.String()}, &lines{ch: make(chan string, 100)}, errs, env)
		}()
		select {
		case l := <-errs.ch:
			if !strings.Contains(l, "watching approvals") {
				t.Errorf("watch --since %s (pruned): %q, want it to start", c, l)
			}
		case code := <-done:
			t.Errorf("watch --since %s (pruned) ended with %d, want it to start", c, code)
		}
		cancel()
		<-done
	}
	past := store.Cursor{Seq: es[2].Cursor.Seq + 1}.String()
	code := cli.Run(t.Context(), []string{"watch", "--since", past}, &lines{ch: make(chan string, 100)}, &lines{ch: make(chan string, 100)}, env)
	if code != cli.ExitFailure {
		t.Errorf("watch --since %s (past the pruned end) exit %d, want %d", past, code, cli.ExitFailure)
	}
}
