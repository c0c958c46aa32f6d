package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/storetest"
)

// TestEventStreamRefusesAForeignCursorOnPostgres: on Postgres the stream
// resumes at a cursor of its own log, and refuses (422, saying so) one
// that is not: SQLite's (transaction 0), one past the end, and one whose
// transaction holds no event with that seq (another database's), which
// it used to take silently, replaying or skipping events (newuser4).
func TestEventStreamRefusesAForeignCursorOnPostgres(t *testing.T) {
	dsn := pgtest.Fresh(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f := pgEventsAdmin(t, ctx, dsn, nil)
	db, g, srv := f.db, f.g, f.srv
	for i, id := range []string{"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002"} {
		r := pending(id)
		r.CreatedAt = time.Now().UTC()
		r.ExpiresAt = r.CreatedAt.Add(time.Hour)
		if err := db.CreateRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := g.Review(ctx, r.ID, approval.Principal{ID: "bob"}, approval.VerdictDeny, "no", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	storetest.FeedShowsAll(t, db) // the creations and the decision
	es, err := db.FeedEntries(ctx, store.Cursor{}, 10)
	if err != nil || len(es) < 3 {
		t.Fatalf("feed: %d entries, %v", len(es), err)
	}
	first, end := es[0].Cursor, es[len(es)-1].Cursor

	get := func(since string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events/stream?since="+since, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer admin-tok")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == 200 {
			return 200, ""
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []string{first.String(), es[1].Cursor.String(), end.String()} {
		if code, body := get(c); code != 200 {
			t.Errorf("since %s (an event of this log): %d %s, want 200", c, code, body)
		}
	}
	for name, c := range map[string]string{
		"SQLite's":            "0.2",
		"past the end":        store.Cursor{Tx: end.Tx + 1000, Seq: 1}.String(),
		"no event of the log": store.Cursor{Tx: first.Tx, Seq: end.Seq + 50}.String(),
	} {
		code, body := get(c)
		if code != 422 || !strings.Contains(body, "is not a position in this gateway's event log") {
			t.Errorf("since %s (%s): %d %s, want 422 saying it is not of this log", c, name, code, body)
		}
	}
}
