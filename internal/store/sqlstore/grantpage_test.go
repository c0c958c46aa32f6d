package sqlstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// newGrant returns a grant of source approval src made at at, its id a
// UUIDv7 of the creating instance's clock (as approval.NewID makes one).
func newGrant(src approval.ID, at time.Time, n int) grant.Grant {
	return grant.Grant{
		ID: string(idAt(at, n)), Principal: "desktop", Tenant: "acme", Server: "pay", Tool: "transfer",
		CreatedAt: at, ExpiresAt: at.Add(time.Hour), CreatedBy: "alice", Approvals: 1, SourceApproval: src,
	}
}

// grant makes a grant on in as an approval with a grant does: a request
// of in's clock, and in the transaction of its review the grant, its id
// of in's clock too.
func (in instance) grant(t *testing.T, n int) string {
	t.Helper()
	src := in.create(t, n)
	g := newGrant(src, in.now(), 1000+n)
	if _, _, err := in.db.UpdateRequestGranting(t.Context(), src, "alice", func(*approval.Request) (*grant.Grant, error) {
		return &g, nil
	}); err != nil {
		t.Fatalf("UpdateRequestGranting(%s) = %v", src, err)
	}
	return g.ID
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

// TestGrantPagingSeesALaggingInstance (grants42): the grants list paged
// by id, as the approvals list did before page41. Two instances on one
// store, the second's clock a minute behind; an admin pages the grants
// one a page to revoke them, and meanwhile the lagging instance makes a
// grant, whose UUIDv7 id sorts before every id already shown. Paging by
// id never showed it: the admin followed next_cursor to "" and never
// revoked a grant made before its last page.
func TestGrantPagingSeesALaggingInstance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			now := time.Now().UTC()
			good := instance{openTest(t, cfg), func() time.Time { return now }}
			lagging := instance{openTest(t, cfg), func() time.Time { return now.Add(-time.Minute) }}
			want := map[string]bool{good.grant(t, 1): true, good.grant(t, 2): true}

			f := store.GrantFilter{Limit: 1}
			seen := map[string]bool{}
			for page := 0; ; page++ {
				ids, next := pageGrants(t, good.db, f)
				for _, id := range ids {
					seen[id] = true
				}
				if page == 0 {
					want[lagging.grant(t, 3)] = true
				}
				if next == "" {
					break
				}
				if page > 10 {
					t.Fatal("more than 10 pages of 3 grants")
				}
				f.Cursor = next
			}
			for id := range want {
				if !seen[id] {
					t.Errorf("grant %s (made before the last page was read) was never listed", id)
				}
			}
		})
	}
}

// TestGrantPagingSeesALateCommit (grants42, Postgres): a grant whose
// transaction (an approval's review, which also writes the request and
// its events) inserted its row before another grant's but commits after
// it, and after the page that showed the other was read. The list must
// still show it before it says "".
func TestGrantPagingSeesALateCommit(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	now := time.Now().UTC()
	in := instance{db, func() time.Time { return now }}
	first := in.grant(t, 1)

	src := in.create(t, 2)
	late, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback() }()
	lateGrant := newGrant(src, now.Add(time.Millisecond), 1002)
	w, err := encodeGrant(lateGrant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.ExecContext(ctx, dollarPlaceholders(`INSERT INTO grants (`+grantColumns+`) VALUES (`+placeholders(numGrantColumns)+`)`), w.args()...); err != nil {
		t.Fatal(err)
	}
	in.now = func() time.Time { return now.Add(2 * time.Millisecond) }
	second := in.grant(t, 3) // commits first
	third := in.grant(t, 4)  // so the page of the second is not the last

	f := store.GrantFilter{Limit: 1}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		ids, next := pageGrants(t, db, f)
		for _, id := range ids {
			seen[id] = true
		}
		if page == 1 {
			if err := late.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		if page > 10 {
			t.Fatal("more than 10 pages of 4 grants")
		}
		f.Cursor = next
	}
	for _, id := range []string{first, lateGrant.ID, second, third} {
		if !seen[id] {
			t.Errorf("grant %s (committed before the last page was read) was never listed", id)
		}
	}
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
				ids[n] = instance{db, func() time.Time { return now.Add(time.Duration(n) * time.Second) }}.grant(t, n)
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
