package gate

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// refusedCreate is faulty whose CreateRequest refuses with err inside the
// transaction: nothing is written.
type refusedCreate struct {
	*faulty
	err error
}

func (s *refusedCreate) CreateRequest(context.Context, approval.Request, ...store.Cap) error {
	return s.err
}

// TestCreationRefusedReleasesNothing (fixes26): a creation the store
// refused inside its transaction wrote nothing, so the held call's lease
// needs no release (createRefused). A conflict (store.ErrConflict, which
// the store's contract gives only for a session_policy request whose
// base revision moved) was taken for a failure that may have come after
// the commit: one needless background release (releaseLater), a write to
// a row that does not exist.
func TestCreationRefusedReleasesNothing(t *testing.T) {
	for name, err := range map[string]error{
		"cap":      &store.CapError{Cap: store.Cap{Scope: store.CapTotal, Limit: 1, Name: capTotal}, Pending: 1},
		"revoked":  fmt.Errorf("create request: %w", session.ErrRevoked),
		"conflict": fmt.Errorf("create request: %w: session s1 is at revision 3, the request was made against 2", store.ErrConflict),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFaulty(sqlitetest.Open(t))
				pol := &swappable{}
				pol.p.Store(testPolicy(time.Hour))
				g := New(&refusedCreate{faulty: f, err: err}, pol, &Options{Instance: "a"})
				if a := g.Admit(t.Context(), writeCall("/refused-"+name)); a.Allowed {
					t.Fatalf("%+v, want refused", a)
				}
				synctest.Wait() // every goroutine of the bubble done or blocked
				if n := writes(f); n != 0 {
					t.Errorf("a creation the store refused (%v; nothing written) was followed by %d request writes (a background release), want none", err, n)
				}
				if ids := g.leases.ids(); len(ids) != 0 {
					t.Errorf("lease marks left: %v", ids)
				}
			})
		})
	}
}
