package gate

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// TestConsumeCatchesUpPolicy: Options.CatchUpPolicy runs before an
// approved call is consumed, whether the call consumes on its own (an
// approval made by another process, seen by the watcher) or the decision's
// transaction consumes it (approved here): a newer revision it puts in
// force denies the call at consume, and a failure to read it refuses the
// call without dispatching (fail closed), the approval left for a re-send.
// Allowed calls never run it.
func TestConsumeCatchesUpPolicy(t *testing.T) {
	deny := testPolicy(time.Minute)
	deny.Rules = append(deny.Rules, policy.Rule{Name: "no writes now", Tools: []string{"write_file"}, Effect: policy.Deny})
	for _, tc := range []struct {
		name    string
		here    bool  // approved through this gate (the joined consume), else in the store directly
		fail    error // CatchUpPolicy's error
		allowed bool
		state   approval.State
		why     string
	}{
		{name: "newer revision, approved elsewhere", state: approval.StateInvalidated, why: "no writes now"},
		{name: "newer revision, approved here", here: true, state: approval.StateInvalidated, why: "no writes now"},
		{name: "store unreadable", fail: errors.New("policy revision 7: invalid"), state: approval.StateApproved, why: "approval store failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := policy.NewHolder(testPolicy(time.Minute))
			var caught atomic.Int32
			var armed atomic.Bool
			f := newFixture(t, time.Minute, nil)
			g := New(f.db, h, &Options{CatchUpPolicy: func(context.Context) error {
				caught.Add(1)
				if !armed.Load() {
					return nil
				}
				if tc.fail != nil {
					return tc.fail
				}
				h.Store(deny) // another instance's revision, put in force now
				return nil
			}})
			watch(t, f.db, g)

			read := Call{Principal: agent, Server: "fs", Tool: "read_text_file", Arguments: []byte(`{}`), ToolDigest: "sha256:d1"}
			if a := g.Admit(t.Context(), read); !a.Allowed {
				t.Fatalf("read: %+v, want allowed", a)
			}
			if n := caught.Load(); n != 0 {
				t.Fatalf("an allowed call read the policy store %d times, want none", n)
			}
			ch := admitAsync(t.Context(), g, writeCall("/a"))
			r := waitPending(t, f.db, 1)[0]
			armed.Store(true)
			if tc.here {
				if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
					t.Fatal(err)
				}
			} else if _, err := f.db.UpdateRequest(t.Context(), r.ID, "carol", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictApprove, "", "", time.Now())
			}); err != nil {
				t.Fatal(err)
			}
			a := recv(t, ch)
			if a.Allowed != tc.allowed || !strings.Contains(a.Message, tc.why) {
				t.Errorf("write: allowed %v, %q; want allowed %v, a refusal naming %q", a.Allowed, a.Message, tc.allowed, tc.why)
			}
			got, err := f.db.GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.state {
				t.Errorf("state %s (%s), want %s", got.State, got.Reason, tc.state)
			}
			if caught.Load() == 0 {
				t.Error("CatchUpPolicy never ran")
			}
		})
	}
}
