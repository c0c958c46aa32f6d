package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// TestGrantEventsFollowTheGrantsTenant: a grant's events (grant_created,
// grant_used, grant_revoked) reach a reader with a tenant only when the
// grant is of that tenant, as its approval's events do, and carry the
// grant's id. They went to every reader, with the acting principal's id,
// and said nothing of which grant.
func TestGrantEventsFollowTheGrantsTenant(t *testing.T) {
	e := newEventEnv(t)
	grantOn := func(n int, tenant string) (approval.ID, string) {
		t.Helper()
		id := e.create(t, n, tenant)
		_, gr, err := e.g.ApproveWithGrant(t.Context(), id, approval.Principal{ID: "bob"}, "fine", "", approval.GrantTerms{TTL: time.Hour})
		if err != nil || gr == nil {
			t.Fatalf("grant: %v, %v", gr, err)
		}
		return id, gr.ID
	}
	acme, acmeGrant := grantOn(1, "acme")
	globex, globexGrant := grantOn(2, "globex")
	a1, g1 := string(acme), string(globex)
	all := []string{"requested " + a1, "reviewed " + a1, "approved " + a1, "grant_created grant " + acmeGrant,
		"requested " + g1, "reviewed " + g1, "approved " + g1, "grant_created grant " + globexGrant}
	withGrants := api.New(e.g, authenticate, &api.Options{Sessions: e.g, Events: e.db, Grants: e.g})
	tests := []struct {
		name   string
		server *api.Server
		token  string
		want   []string
	}{
		{"no tenant", withGrants, "admin-tok", all},
		{"tenant acme", withGrants, "acme-tok", all[:4]},
		// Without the grant routes the server cannot tell a grant's
		// tenant: a reader with a tenant sees no grant event.
		{"tenant acme, no grants", e.admin, "acme-tok", all[:3]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, tc.server, "GET", "/v1/events?since=0", tc.token, "")
			if a.status != http.StatusOK {
				t.Fatalf("status %d %s", a.status, a.body)
			}
			var got []string
			for _, ev := range decodeAs[api.EventPage](t, a).Events {
				if ev.ApprovalID != "" {
					got = append(got, ev.Type+" "+ev.ApprovalID)
				} else {
					got = append(got, ev.Type+" grant "+ev.GrantID)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
