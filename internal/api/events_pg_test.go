package api_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/api"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
	"toolgate/internal/store/storetest"
)

// TestEventStreamDeliversALateCommit is the regression test for a stream
// that paged the log by seq: on Postgres a transaction that took a lower
// seq can commit after one with a higher seq, and a reader that already
// sent the higher one (Last-Event-ID = its seq) skipped the late one
// forever. The stream reads the change feed, so the late event follows.
func TestEventStreamDeliversALateCommit(t *testing.T) {
	dsn := pgtest.Fresh(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bc := new(api.Broadcast)
	f := pgEventsAdmin(t, ctx, dsn, bc.Wait)
	db, admin, srv := f.db, f.admin, f.srv

	r := pending("01900000-0000-7000-8000-000000000001")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	storetest.FeedShowsAll(t, db) // else the stream may start before the creation and send it first
	resp, stream := openStream(t, ctx, srv, "/v1/events/stream", "admin-tok")
	defer resp.Body.Close()

	// Two transactions on their own connections: early takes its
	// transaction id first, late second; late then takes the lower seq.
	begin := func() pgx.Tx {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	insert := func(tx pgx.Tx, actor string) {
		t.Helper()
		if _, err := tx.Exec(ctx, `INSERT INTO events (request_id, type, state, actor, at) VALUES ($1, 'reviewed', 'pending', $2, 0)`,
			string(r.ID), actor); err != nil {
			t.Fatal(err)
		}
	}
	early, late := begin(), begin()
	insert(late, "late")   // the lower seq
	insert(early, "early") // the higher seq
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.FeedShowsAll(t, db) // the one read on Notify must see it: the poll is an hour
	bc.Notify()
	first, ok := stream.next()
	if !ok || first.data.Actor != "early" {
		t.Fatalf("first event = %+v, %v; want the early commit", first, ok)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.FeedShowsAll(t, db)
	bc.Notify()
	second, ok := stream.next()
	if !ok || second.data.Actor != "late" {
		t.Fatalf("after the late commit the stream sent %+v, %v; want the late event", second, ok)
	}
	if second.data.Seq >= first.data.Seq {
		t.Errorf("staging failed: late seq %d, early seq %d; want the late event's seq lower", second.data.Seq, first.data.Seq)
	}

	// The page API resumes the same way: after the early event's cursor
	// comes the late one.
	page := decodeAs[api.EventPage](t, send(t, admin, "GET", "/v1/events?since="+url.QueryEscape(first.id), "admin-tok", ""))
	if len(page.Events) != 1 || page.Events[0].Actor != "late" || page.Next != second.id {
		t.Errorf("page after %s = %+v; want the late event, next %s", first.id, page, second.id)
	}
}

// pgAdmin is an admin API served over a Postgres store (pgEventsAdmin).
type pgAdmin struct {
	db    *sqlstore.DB
	g     *gate.Gate
	admin *api.Server
	srv   *httptest.Server
}

// pgEventsAdmin opens the Postgres store at dsn and serves the admin API
// over it: a gate allowing everything, holds of a minute, the event log
// polled once an hour, so a stream hears of new events by changed when it
// is not nil (see [api.Options.EventsChanged]). All of it is closed when
// t ends.
func pgEventsAdmin(t *testing.T, ctx context.Context, dsn string, changed func() <-chan struct{}) pgAdmin {
	t.Helper()
	db, err := sqlstore.Open(ctx, sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	pol := &policy.Policy{Default: policy.Allow, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	g := gate.New(db, pol, nil)
	admin := api.New(g, authenticate, &api.Options{Events: db, EventsChanged: changed, EventPoll: time.Hour})
	srv := httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	t.Cleanup(admin.EndStreams)
	return pgAdmin{db: db, g: g, admin: admin, srv: srv}
}
