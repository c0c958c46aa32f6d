package gate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// taskReads is a real store that counts its GetTask calls.
type taskReads struct {
	store.Store
	n atomic.Int32
}

func (s *taskReads) GetTask(ctx context.Context, id approval.ID) (store.Task, error) {
	s.n.Add(1)
	return s.Store.GetTask(ctx, id)
}

// TestHeldAsTaskTakesTheDecisionsProbe: HeldAsTask answers from a
// store.TaskProbe for its request that the decision's write filled (the
// REST API's answer to a decision, on Postgres: the task read in the
// decision's pipeline), without a read of its own; with no probe, an
// unfilled one or one for another request it reads the task.
func TestHeldAsTaskTakesTheDecisionsProbe(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		ctx := t.Context()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		s := &taskReads{Store: db}
		g := New(s, pol, &Options{})
		id, other := approval.ID("0190a000-0000-7000-8000-000000000001"), approval.ID("0190a000-0000-7000-8000-000000000002")
		if err := db.CreateTask(ctx, store.Task{RequestID: id, Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			probe *store.TaskProbe
			want  bool
			reads int32
		}{
			{"no probe", nil, true, 1},
			{"unread probe", &store.TaskProbe{ID: id}, true, 1},
			{"another request's probe", &store.TaskProbe{ID: other, Read: true}, true, 1},
			// The probe's answer, not the store's: read in the decision.
			{"filled probe", &store.TaskProbe{ID: id, Read: true, Task: false}, false, 0},
		} {
			cctx := ctx
			if c.probe != nil {
				cctx = store.WithTaskProbe(ctx, c.probe)
			}
			before := s.n.Load()
			got, err := g.HeldAsTask(cctx, id)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got != c.want || s.n.Load()-before != c.reads {
				t.Errorf("%s: HeldAsTask = %v with %d task reads, want %v with %d", c.name, got, s.n.Load()-before, c.want, c.reads)
			}
		}
	})
}
