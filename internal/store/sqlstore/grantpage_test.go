package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
)

// newGrant returns a grant of source approval src made at at, its id a
// UUIDv7 of the creating instance's clock (as approval.NewID makes one).
func newGrant(src approval.ID, at time.Time, n int) grant.Grant {
	return grant.Grant{
		ID: string(idAt(at, n)), Principal: "desktop", Tenant: "acme", Server: "pay", Tool: "transfer",
		CreatedAt: at, ExpiresAt: at.Add(time.Hour), CreatedBy: "alice", Approvals: 1, SourceApproval: src,
	}
}

// pageGrants reads one page of f and returns its ids and next cursor.
func pageGrants(t *testing.T, db *DB, f store.GrantFilter) ([]string, string) {
	t.Helper()
	gs, next, err := db.ListGrants(t.Context(), f)
	if err != nil {
		t.Fatalf("ListGrants(%+v) = %v", f, err)
	}
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.ID
	}
	return ids, next
}

// grantsList is the grants list for the paging tests of listpage_test.go
// (TestPagingSeesALaggingInstance, TestPagingSeesALateCommit): grants
// made as an approval with a grant makes them.
var grantsList = pagedList{
	name: "grants",
	create: func(ctx context.Context, in instance, at time.Time, n, _ int) (string, error) {
		r := pendingRequest(idAt(at, n))
		r.CreatedAt, r.ExpiresAt = at, at.Add(time.Hour)
		if err := in.db.CreateRequest(ctx, r); err != nil {
			return "", err
		}
		g := newGrant(r.ID, at, 1000+n)
		_, _, err := in.db.UpdateRequestGranting(ctx, r.ID, "alice", func(*approval.Request) (*grant.Grant, error) { return &g, nil })
		return g.ID, err
	},
	insert: func(t *testing.T, in instance, tx *sql.Tx, at time.Time, n int) string {
		t.Helper()
		g := newGrant(in.create(t, n), at, 1000+n)
		w, err := encodeGrant(g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(t.Context(), dollarPlaceholders(`INSERT INTO grants (`+grantColumns+`) VALUES (`+placeholders(numGrantColumns)+`)`), w.args()...); err != nil {
			t.Fatal(err)
		}
		return g.ID
	},
	page: func(t *testing.T, db *DB, limit int, cursor string) ([]string, string) {
		t.Helper()
		return pageGrants(t, db, store.GrantFilter{Limit: limit, Cursor: cursor})
	},
}

// TestGrantOldCursorStillPages (grants42): grants stored before list
// orders (migration 25 gave them 0) come first, in id order, and a cursor
// from before (the id of a page's last grant) goes on after that id; a
// filter still applies on every page.
func TestGrantOldCursorStillPages(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			now := time.Now().UTC()
			ids := map[int]string{}
			for _, n := range []int{3, 1, 2, 4} {
				ids[n] = grantsList.make(t, instance{db, func() time.Time { return now.Add(time.Duration(n) * time.Second) }}, n)
			}
			if _, err := db.sql.ExecContext(t.Context(), db.d.rebind(`UPDATE grants SET list_order = '0' WHERE id <> ?`), ids[4]); err != nil {
				t.Fatal(err)
			}
			if _, _, err := db.RevokeGrant(t.Context(), ids[2], "bob", "", now); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				f    store.GrantFilter
				want []string
			}{
				{store.GrantFilter{}, []string{ids[1], ids[2], ids[3], ids[4]}},
				{store.GrantFilter{Cursor: ids[1]}, []string{ids[2], ids[3], ids[4]}},
				{store.GrantFilter{Cursor: ids[1], UsableAt: now}, []string{ids[3], ids[4]}},
			} {
				if got, _ := pageGrants(t, db, c.f); !slices.Equal(got, c.want) {
					t.Errorf("ListGrants(%+v) = %v, want %v", c.f, got, c.want)
				}
			}
			if _, _, err := db.ListGrants(t.Context(), store.GrantFilter{Cursor: "p.!"}); !errors.Is(err, store.ErrBadCursor) {
				t.Errorf("ListGrants(cursor p.!) = %v, want ErrBadCursor", err)
			}
		})
	}
}
