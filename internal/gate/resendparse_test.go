package gate

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestResendWaitKeepsNoParse (fixes30): an identical re-send that waits in
// attach for another instance's lease (takeOver) kept its parsed
// arguments (approval.Parsed: a copy of them and 12 bytes per value) for
// the whole wait, up to a lease, because hold's display copy might still
// need them after attach. Now the parse is dropped before attach and made
// again only if a request is made after all: a cleanup on the parse runs
// while the re-send waits. Once the other instance lets go, the re-send
// takes the request over and, approved, runs exactly once.
func TestResendWaitKeepsNoParse(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{Instance: "a", Lease: 5 * time.Second})
	b := New(f.db, f.pol, &Options{Instance: "b", Lease: 5 * time.Second})
	call := func() Call { return writeCall("/resend-parse") }
	// Held on a, which renews its lease: b's re-send waits for it.
	started := make(chan struct{}, 1)
	ca := call()
	ca.KeepAlive = func(context.Context, string) {
		select {
		case started <- struct{}{}:
		default:
		}
	}
	actx, cancelA := context.WithCancelCause(t.Context())
	defer cancelA(nil)
	onA := admitAsync(actx, f.gate, ca)
	select {
	case <-started:
	case a := <-onA:
		t.Fatalf("not held on a: %+v", a)
	}
	r := waitPending(t, f.db, 1)[0]

	gone := make(chan struct{})
	parsed := make(chan struct{}, 1)
	b.parsedHook = func(p *approval.Parsed) {
		runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, gone)
		parsed <- struct{}{}
	}
	t.Cleanup(func() { b.parsedHook = nil })
	onB := admitAsync(t.Context(), b, call())
	select {
	case <-parsed:
	case a := <-onB:
		t.Fatalf("b answered before it waited: %+v", a)
	}
	b.parsedHook = nil
	// The re-send is in takeOver's wait (a's lease has up to 5 s to run); its
	// parse must be collectable now.
	deadline := time.After(10 * time.Second)
	for collected := false; !collected; {
		runtime.GC()
		select {
		case <-gone:
			collected = true
		case a := <-onB:
			t.Fatalf("b answered while a held the request: %+v", a)
		case <-deadline:
			t.Fatal("the re-send's parsed arguments are still referenced while it waits for another instance's lease")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got, err := f.db.GetRequest(t.Context(), r.ID); err != nil || got.HeldBy != "a" {
		t.Fatalf("held by %q (%v) after the parse was collected, want still a", got.HeldBy, err)
	}

	// a's caller goes away: a lets go, b takes the request over.
	cancelA(errors.New("client connection dropped"))
	if a := recv(t, onA); a.Allowed {
		t.Fatalf("a's dropped call was allowed: %+v", a)
	}
	for {
		got, err := f.db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.HeldBy == "b" {
			break
		}
		select {
		case a := <-onB:
			t.Fatalf("b answered before it took the request over: %+v", a)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := b.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, onB)
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("b's re-send after approval: %+v, want allowed on %s", a, r.ID)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	got, err := f.db.GetRequest(t.Context(), r.ID)
	if err != nil || got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("request %s: state %s, outcome %q (%v); want consumed once, ok", r.ID, got.State, got.DispatchOutcome, err)
	}
	if n := len(waitPending(t, f.db, 0)); n != 0 {
		t.Fatalf("%d requests pending after the one call ran", n)
	}
}
