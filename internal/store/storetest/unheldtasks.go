package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// testUnheldApprovedTasks (branch tasks48): UnheldApprovedTasks returns
// exactly the approved, unconsumed, still valid tasks with sealed
// arguments whose holder is gone (no holder, a lapsed lease, a lapsed
// instance lease), each with its task row, in id order after the cursor;
// never an approved call that is no task, a pending or consumed task, a
// live holder's, a direct task, one whose arguments were dropped or one
// past its validity. More approved non-task requests than a page ahead
// of a task do not hide it.
func testUnheldApprovedTasks(t *testing.T, s store.Store) {
	now := t0.Add(5 * time.Minute)
	task := func(rid approval.ID) store.Task {
		return store.Task{RequestID: rid, Principal: approval.Principal{ID: "desktop", Kind: "agent", Tenant: "acme"},
			Arguments: []byte{1, 2, 255}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	}
	// make creates request rid (a task when withTask), approved at t0+1m
	// unless pending, then applies change.
	make := func(rid approval.ID, withTask, approve bool, change func(*approval.Request)) {
		t.Helper()
		mustCreate(t, s, pending(rid))
		if withTask {
			if err := s.CreateTask(t.Context(), task(rid)); err != nil {
				t.Fatal(err)
			}
		}
		if approve {
			mustReview(t, s, rid, "alice", approval.VerdictApprove, t0.Add(time.Minute))
		}
		if change != nil {
			mustUpdate(t, s, rid, "test", func(r *approval.Request) error { change(r); return nil })
		}
	}
	// Approved calls that are no task (held calls whose holder died),
	// more than a page of them, ahead of every task.
	for n := 1; n <= 120; n++ {
		make(id(7, n), false, true, nil)
	}
	free, dead, inst := id(7, 201), id(7, 202), id(7, 203)
	make(free, true, true, nil)
	make(dead, true, true, func(r *approval.Request) { r.Renew("gw-dead", t0.Add(2*time.Minute)) })
	make(inst, true, true, func(r *approval.Request) { r.Renew("gw-inst", t0.Add(time.Minute)) })
	if _, err := s.RenewLeases(t.Context(), "gw-inst", []approval.ID{inst}, t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	make(id(7, 204), true, false, nil) // pending
	make(id(7, 205), true, true, func(r *approval.Request) { r.Renew("gw-live", t0.Add(time.Hour)) })
	make(id(7, 206), true, true, func(r *approval.Request) {
		r.State, r.ConsumedAt = approval.StateConsumed, t0.Add(2*time.Minute)
	})
	make(id(7, 207), true, true, nil)
	if err := s.DropTaskArguments(t.Context(), id(7, 207)); err != nil {
		t.Fatal(err)
	}
	make(id(7, 208), true, true, func(r *approval.Request) { r.ValidFor = 90 * time.Second }) // valid until t0+2m30s
	mustCreate(t, s, pending(id(7, 209)))
	mustReview(t, s, id(7, 209), "alice", approval.VerdictApprove, t0.Add(time.Minute))
	direct := task(id(7, 209))
	direct.Arguments, direct.State, direct.LeaseUntil = nil, store.TaskWorking, t0.Add(time.Minute)
	if err := s.CreateTask(t.Context(), direct); err != nil {
		t.Fatal(err)
	}

	list := func(at time.Time, after approval.ID, limit int) []approval.ID {
		t.Helper()
		got, err := s.UnheldApprovedTasks(t.Context(), at, after, limit)
		if err != nil {
			t.Fatalf("UnheldApprovedTasks(%v, %q, %d) = %v", at, after, limit, err)
		}
		var ids []approval.ID
		for _, at := range got {
			ids = append(ids, at.Request.ID)
			diffRequests(t, "request "+string(at.Request.ID), mustGet(t, s, at.Request.ID), at.Request)
			want := store.NormalizeTask(task(at.Request.ID))
			if diff := cmp.Diff(want, at.Task); diff != "" {
				t.Errorf("task %s (-want +got):\n%s", at.Request.ID, diff)
			}
		}
		return ids
	}
	if got, want := list(now, "", 100), []approval.ID{free, dead}; !cmp.Equal(got, want) {
		t.Errorf("at t0+5m: %v, want %v (the free and the lapsed holder's; the instance's lease runs to t0+10m)", got, want)
	}
	if got, want := list(t0.Add(10*time.Minute), "", 0), []approval.ID{free, dead, inst}; !cmp.Equal(got, want) {
		t.Errorf("at t0+10m: %v, want %v (the instance's lease ended)", got, want)
	}
	if got, want := list(t0.Add(10*time.Minute), free, 1), []approval.ID{dead}; !cmp.Equal(got, want) {
		t.Errorf("after %s, limit 1: %v, want %v", free, got, want)
	}
	if got := list(t0.Add(10*time.Minute), inst, 100); len(got) != 0 {
		t.Errorf("after the last: %v, want none", got)
	}
	if got := list(t0.Add(12*time.Minute), "", 100); len(got) != 0 {
		t.Errorf("past their validity (t0+11m): %v, want none", got)
	}
}
