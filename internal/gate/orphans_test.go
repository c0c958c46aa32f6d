package gate

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// TestOrphanedTasks (branch tasks47): on each store, an approved task
// whose holder stopped is listed by another instance, and nothing else
// is: not while it is pending, not a held call that is no task, not once
// it was taken over and consumed.
func TestOrphanedTasks(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, keyed(t, &Options{Instance: "a", Lease: 300 * time.Millisecond}))
		b := New(db, f.pol, keyed(t, &Options{Instance: "b", Lease: 300 * time.Millisecond}))
		held := make(chan approval.Request, 2)
		task := writeCall("/orphan")
		task.Task = true
		task.OnHold = func(r approval.Request) { held <- r }
		plain := writeCall("/plain")
		plain.OnHold = func(r approval.Request) { held <- r }
		ctx, stop := context.WithCancelCause(t.Context())
		chTask, chPlain := admitAsync(ctx, f.gate, task), admitAsync(ctx, f.gate, plain)
		r1, r2 := <-held, <-held
		rTask, rPlain := r1, r2
		if _, err := db.GetTask(t.Context(), rTask.ID); err != nil {
			rTask, rPlain = rPlain, rTask
		}
		if got, _, err := b.OrphanedTasks(t.Context(), "", 0); err != nil || len(got) != 0 {
			t.Fatalf("pending, held: OrphanedTasks = %v, %v; want none", got, err)
		}
		f.gate.Stop()
		stop(errors.New("instance a shuts down"))
		recv(t, chTask)
		recv(t, chPlain)
		if got, _, err := b.OrphanedTasks(t.Context(), "", 0); err != nil || len(got) != 0 {
			t.Fatalf("pending, holder gone: OrphanedTasks = %v, %v; want none", got, err)
		}
		mustReview(t, b, rTask.ID, approval.VerdictApprove)
		mustReview(t, b, rPlain.ID, approval.VerdictApprove)
		var got []approval.Request
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			if got, _, err = b.OrphanedTasks(t.Context(), "", 0); err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // the stopped holder's lease lapses
		}
		if len(got) != 1 || got[0].ID != rTask.ID || got[0].State != approval.StateApproved {
			t.Fatalf("approved, holder gone: OrphanedTasks = %+v; want only the task %s (not the plain call %s)", got, rTask.ID, rPlain.ID)
		}
		call, err := b.TaskCall(t.Context(), rTask.ID)
		if err != nil {
			t.Fatal(err)
		}
		call.ToolDigest = "sha256:d1" // the gateway fills it from its catalog
		a := b.Admit(t.Context(), call)
		if !a.Allowed || a.ApprovalID != rTask.ID {
			t.Fatalf("take-over: %+v", a)
		}
		a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: json.RawMessage(`{"content":[]}`)})
		if got, _, err := b.OrphanedTasks(t.Context(), "", 0); err != nil || len(got) != 0 {
			t.Fatalf("consumed: OrphanedTasks = %v, %v; want none", got, err)
		}
	})
}
