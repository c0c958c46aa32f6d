package gate

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// panicPolicy is a real policy whose evaluation panics while armed, as a
// bug in the evaluator would.
type panicPolicy struct {
	swappable
	armed atomic.Bool
}

func (p *panicPolicy) Evaluate(c policy.Call) (policy.Decision, error) {
	if p.armed.Load() {
		panic("attack14: in the policy evaluation")
	}
	return p.swappable.Evaluate(c)
}

// TestPolicyPanicDenies (attack14): an evaluator that panics denies the
// call as a failed evaluation does ("policy evaluation failed"), through
// Admit (the SDK path's admission, where a panic ended the process) and
// AdmitUnlessHeld (the lean front's), and a held call approved while the
// evaluator panics at its consume is refused, nothing run. Nothing
// panics out of the gate.
func TestPolicyPanicDenies(t *testing.T) {
	pol := &panicPolicy{}
	pol.p.Store(testPolicy(time.Minute))
	f := newFixture(t, time.Minute, nil)
	g := New(f.db, pol, nil)
	noPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("%s panicked: %v", what, v)
			}
		}()
		fn()
	}
	pol.armed.Store(true)
	read := Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{"path":"/r"}`)}
	var a Admission
	noPanic("Admit", func() { a = g.Admit(t.Context(), read) })
	if a.Allowed || !strings.Contains(a.Message, "policy evaluation failed") {
		t.Fatalf("Admit with a panicking policy: %+v, want denied", a)
	}
	noPanic("AdmitUnlessHeld", func() {
		c := read
		if h := g.AdmitUnlessHeld(t.Context(), &c, &a); h != nil {
			t.Fatalf("handed off: %+v", h)
		}
	})
	if a.Allowed || !strings.Contains(a.Message, "policy evaluation failed") {
		t.Fatalf("AdmitUnlessHeld with a panicking policy: %+v, want denied", a)
	}

	// Held while the policy works; its consume's evaluation panics.
	pol.armed.Store(false)
	ch := admitAsync(t.Context(), g, writeCall("/consume"))
	r := waitPending(t, f.db, 1)[0]
	pol.p.Store(testPolicy(time.Minute)) // a new revision: the consume evaluates again
	pol.armed.Store(true)
	noPanic("Review", func() {
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
	})
	a = recv(t, ch)
	pol.armed.Store(false)
	if a.Allowed || !strings.Contains(a.Message, "policy evaluation failed") {
		t.Fatalf("approved call consumed while its re-evaluation panicked: %+v", a)
	}
}
