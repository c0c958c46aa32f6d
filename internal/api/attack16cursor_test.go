package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// pruneAmidLog is a real SQLite store whose change feed, read once right
// after the position at, first has retention prune every event it may
// (Prune with an event retention that has passed for all): a prune that
// commits between the resume check's reads, as the sweeper's can.
type pruneAmidLog struct {
	*sqlstore.DB
	at   store.Cursor
	once sync.Once
	err  error
}

func (l *pruneAmidLog) FeedEntries(ctx context.Context, after store.Cursor, limit int) ([]store.FeedEntry, error) {
	if after == l.at {
		l.once.Do(func() {
			_, l.err = l.Prune(ctx, store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour))
		})
	}
	return l.DB.FeedEntries(ctx, after, limit)
}

// TestResumeCursorPrunedDuringTheCheck: a since= (or Last-Event-ID)
// naming an event of the log that retention prunes while the resume
// check reads the log (after it saw the event still kept, before it read
// the event itself) is accepted as any cursor at or before the pruned
// prefix is, not refused as a position of another store (a 422 that
// stops the inbox's stream and makes watch --since exit 1, for a cursor
// the gateway itself gave out; attack16).
func TestResumeCursorPrunedDuringTheCheck(t *testing.T) {
	for _, how := range []string{"page", "stream since", "stream Last-Event-ID"} {
		t.Run(how, func(t *testing.T) {
			db := sqlitetest.Open(t)
			g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
			// Request 1 is denied (terminal): its events may be pruned.
			// Request 2 stays pending: its event, the last, is kept.
			es := deniedThenPending(t, db, g)
			if es[len(es)-1].Event.RequestID != "01900000-0000-7000-8000-000000000002" {
				t.Fatalf("events %+v, want request 2's last", es)
			}
			c := es[len(es)-2].Cursor // request 1's last: pruned during the check
			log := &pruneAmidLog{DB: db, at: store.Cursor{Tx: c.Tx, Seq: c.Seq - 1}}
			s := api.New(g, authenticate, &api.Options{Events: log, EventPoll: time.Hour})
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			t.Cleanup(s.EndStreams)

			status := 0
			if how == "page" {
				status = send(t, s, "GET", "/v1/events?since="+c.String(), "bob-tok", "").status
			} else {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				url := srv.URL + "/v1/events/stream"
				if how == "stream since" {
					url += "?since=" + c.String()
				}
				req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer bob-tok")
				if how == "stream Last-Event-ID" {
					req.Header.Set("Last-Event-ID", c.String())
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				status = resp.StatusCode
				cancel()
				_ = resp.Body.Close()
			}
			if log.err != nil {
				t.Fatal(log.err)
			}
			pruned, err := db.PrunedThrough(t.Context())
			if err != nil || pruned != c {
				t.Fatalf("pruned through %s (%v), want %s: the prune did not run amid the check", pruned, err, c)
			}
			if status != http.StatusOK {
				t.Errorf("%s at %s, pruned during the check: %d, want 200", how, c, status)
			}
		})
	}
}

// deniedThenPending creates two requests of tenant acme in db, ids
// ...0001 and ...0002, a millisecond apart; denies the first (through g)
// and leaves the second pending. It returns the change feed from the
// start (request 1's events, then request 2's).
func deniedThenPending(t *testing.T, db *sqlstore.DB, g *gate.Gate) []store.FeedEntry {
	t.Helper()
	now := time.Now().UTC()
	for n, id := range []approval.ID{"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002"} {
		r := pending(string(id))
		r.Tenant = "acme"
		r.CreatedAt = now.Add(time.Duration(n) * time.Millisecond)
		r.ExpiresAt = now.Add(time.Hour)
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			if _, err := g.Review(t.Context(), id, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictDeny, "no", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	es, err := db.FeedEntries(t.Context(), store.Cursor{}, 10)
	if err != nil || len(es) < 3 {
		t.Fatalf("events %+v (%v), want request 1's, then request 2's", es, err)
	}
	return es
}
