package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// swappable is an Evaluator whose policy a test can replace mid-hold.
type swappable struct{ p atomic.Pointer[policy.Policy] }

func (s *swappable) Evaluate(c policy.Call) (policy.Decision, error) { return s.p.Load().Evaluate(c) }

func testPolicy(timeout time.Duration) *policy.Policy {
	return &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: timeout, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
		Rules: []policy.Rule{
			{Name: "reads", Server: "fs", Tools: []string{"read_*"}, Effect: policy.Allow},
			{Name: "no deletes", Tools: []string{"*delete*"}, Effect: policy.Deny},
		},
	}
}

type fixture struct {
	db   *sqlstore.DB
	pol  *swappable
	gate *Gate
}

func newFixture(t *testing.T, timeout time.Duration, opts *Options) *fixture {
	t.Helper()
	return newFixtureOn(t, sqlitetest.Open(t), timeout, opts)
}

// newFixtureOn is newFixture on db (eachStore's).
func newFixtureOn(t *testing.T, db *sqlstore.DB, timeout time.Duration, opts *Options) *fixture {
	t.Helper()
	pol := &swappable{}
	pol.p.Store(testPolicy(timeout))
	if opts == nil {
		opts = &Options{}
	}
	f := &fixture{db: db, pol: pol, gate: New(db, pol, opts)}
	watch(t, db, f.gate)
	return f
}

// watch wakes g's held calls on changes made in db behind the gate's back
// (as another process would), the way cmd wires it, until the test ends.
func watch(t *testing.T, db *sqlstore.DB, g *Gate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Watch(ctx, func(id approval.ID) {
			if id == "" {
				g.WakeAll()
			} else {
				g.Wake(id)
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

var agent = approval.Principal{ID: "agent-1", Kind: "agent", OnBehalfOf: "bob"}

func writeCall(path string) Call {
	return Call{Principal: agent, Server: "fs", Tool: "write_file", Arguments: []byte(fmt.Sprintf(`{"path":%q,"content":"x"}`, path)), ToolDigest: "sha256:d1"}
}

// admitAsync starts Admit in a goroutine and returns a channel with its answer.
func admitAsync(ctx context.Context, g *Gate, c Call) <-chan Admission {
	ch := make(chan Admission, 1)
	go func() { ch <- g.Admit(ctx, c) }()
	return ch
}

// waitPending waits until n requests are pending and returns them.
func waitPending(t *testing.T, s store.Store, n int) []approval.Request {
	t.Helper()
	for range 2000 {
		rs, _, err := s.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == n {
			return rs
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never saw %d pending requests", n)
	return nil
}

func recv(t *testing.T, ch <-chan Admission) Admission {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("Admit did not return")
		return Admission{}
	}
}

var alice = approval.Principal{ID: "alice", Kind: "human"}

func TestAllowAndDenyDoNotTouchTheStore(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	a := f.gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{}`)})
	if !a.Allowed {
		t.Fatalf("read_file: %+v, want allowed", a)
	}
	d := f.gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "delete_file", Arguments: []byte(`{}`)})
	if d.Allowed || !strings.Contains(d.Message, `"no deletes"`) {
		t.Fatalf("delete_file: %+v, want a refusal naming the rule", d)
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 0 {
		t.Fatalf("%d pending requests, want 0", n)
	}
}

func TestApproveReleasesAndConsumes(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	if r.RequestedBy != "agent-1" || r.Server != "fs" || r.Tool != "write_file" || !strings.HasPrefix(r.ArgumentsHash, "sha256:") {
		t.Fatalf("stored request %+v", r)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("admission %+v, want allowed via %s", a, r.ID)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	got, err := f.db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK || got.DecidedBy != "alice" {
		t.Fatalf("after dispatch: state %s outcome %q decided_by %q", got.State, got.DispatchOutcome, got.DecidedBy)
	}
	// A late decision conflicts and changes nothing.
	if _, err := f.gate.Review(t.Context(), r.ID, approval.Principal{ID: "carol"}, approval.VerdictDeny, "", ""); !errors.Is(err, approval.ErrResolved) {
		t.Fatalf("late deny: %v, want ErrResolved", err)
	}
	// The same reviewer repeating the same verdict gets the current state.
	cur, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
	if !errors.Is(err, approval.ErrDuplicate) || cur.State != approval.StateConsumed {
		t.Fatalf("repeat approve: %v %s", err, cur.State)
	}
}

func TestDenyCarriesReason(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictDeny, "not on a Friday", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if a.Allowed || !strings.Contains(a.Message, "not on a Friday") || !strings.Contains(a.Message, "alice") {
		t.Fatalf("admission %+v", a)
	}
}

func TestSelfReviewRefused(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(errors.New("test over"))
	admitAsync(ctx, f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	for _, p := range []approval.Principal{agent, {ID: "bob"}} {
		if _, err := f.gate.Review(t.Context(), r.ID, p, approval.VerdictApprove, "", ""); !errors.Is(err, approval.ErrSelfReview) {
			t.Errorf("review by %s: %v, want ErrSelfReview", p.ID, err)
		}
	}
}

func TestTimeoutSaysTimedOut(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond, nil)
	a := f.gate.Admit(t.Context(), writeCall("/a"))
	if a.Allowed || !a.Timeout || !strings.Contains(a.Message, "timed out") || strings.Contains(a.Message, "denied") {
		t.Fatalf("admission %+v, want a timeout", a)
	}
	r, err := f.db.GetRequest(t.Context(), a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != approval.StateExpired {
		t.Fatalf("state %s, want expired", r.State)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); !errors.Is(err, approval.ErrResolved) {
		t.Fatalf("approve after expiry: %v, want ErrResolved", err)
	}
}

func TestExplicitCancelCancelsTheRequest(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ctx, cancel := context.WithCancel(t.Context())
	ch := admitAsync(ctx, f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	cancel() // what notifications/cancelled does to the handler's context
	a := recv(t, ch)
	if a.Allowed {
		t.Fatal("cancelled call was allowed")
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if got.State != approval.StateCancelled {
		t.Fatalf("state %s, want cancelled", got.State)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); !errors.Is(err, approval.ErrResolved) {
		t.Fatalf("approve after cancel: %v, want ErrResolved", err)
	}
}

func TestDroppedCallerLeavesPending(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	ch := admitAsync(ctx, f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	cancel(errors.New("client connection dropped"))
	if a := recv(t, ch); a.Allowed {
		t.Fatal("dropped call was allowed")
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if got.State != approval.StatePending {
		t.Fatalf("state %s, want pending", got.State)
	}
}

func TestApprovingOneOfThreeReleasesOnlyThatOne(t *testing.T) { // case C12
	f := newFixture(t, time.Minute, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(errors.New("test over"))
	chs := map[string]<-chan Admission{}
	for _, p := range []string{"/21", "/22", "/23"} {
		chs[p] = admitAsync(ctx, f.gate, writeCall(p))
	}
	rs := waitPending(t, f.db, 3)
	var target approval.Request
	for _, r := range rs {
		if strings.Contains(string(r.Arguments), "/22") {
			target = r
		}
	}
	if target.ID == "" {
		t.Fatal("no request shows path /22")
	}
	if _, err := f.gate.Review(t.Context(), target.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, chs["/22"]); !a.Allowed || a.ApprovalID != target.ID {
		t.Fatalf("/22: %+v", a)
	}
	for _, p := range []string{"/21", "/23"} {
		select {
		case a := <-chs[p]:
			t.Fatalf("%s returned %+v, want still held", p, a)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 2 {
		t.Fatalf("%d pending, want 2", n)
	}
}

func TestKeepAlivesWhileHeld(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{KeepAlive: 20 * time.Millisecond})
	var mu sync.Mutex
	n := 0
	c := writeCall("/a")
	c.KeepAlive = func(context.Context, string) { mu.Lock(); n++; mu.Unlock() }
	ch := admitAsync(t.Context(), f.gate, c)
	r := waitPending(t, f.db, 1)[0]
	for {
		mu.Lock()
		got := n
		mu.Unlock()
		if got >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	}
}

func TestPolicyTurnedToDenyInvalidates(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "freeze", Server: "fs", Effect: policy.Deny})
	f.pol.p.Store(p)
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if a.Allowed || !strings.Contains(a.Message, "freeze") {
		t.Fatalf("admission %+v, want refusal naming freeze", a)
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if got.State != approval.StateInvalidated {
		t.Fatalf("state %s, want invalidated", got.State)
	}
}

func TestPendingCap(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{MaxPendingPerPrincipal: 2})
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(errors.New("test over"))
	admitAsync(ctx, f.gate, writeCall("/1"))
	admitAsync(ctx, f.gate, writeCall("/2"))
	before := waitPending(t, f.db, 2)
	a := f.gate.Admit(t.Context(), writeCall("/3"))
	if a.Allowed || !strings.Contains(a.Message, "max_pending_per_principal") {
		t.Fatalf("third call: %+v, want refusal naming the cap", a)
	}
	after := waitPending(t, f.db, 2)
	for i := range before {
		if before[i].ID != after[i].ID || after[i].State != approval.StatePending {
			t.Fatalf("pending requests changed: %v → %v", before[i].ID, after[i].ID)
		}
	}
}

func TestStoreDownFailsClosed(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	f.db.Close()
	a := f.gate.Admit(t.Context(), writeCall("/a"))
	if a.Allowed || !strings.Contains(a.Message, "unavailable") {
		t.Fatalf("admission %+v, want a fail-closed refusal", a)
	}
	// Allowed calls do not depend on the store.
	if a := f.gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "read_file"}); !a.Allowed {
		t.Fatalf("read with store down: %+v", a)
	}
}

func TestSweeperExpiresAbandonedRequests(t *testing.T) {
	// The request must be seen pending before it expires: a TTL of a
	// second leaves a loaded machine time to see it (100 ms did not,
	// once, under a load average of 25).
	f := newFixture(t, time.Second, &Options{SweepInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancelCause(t.Context())
	admitAsync(ctx, f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	cancel(errors.New("client connection dropped")) // leaves it pending
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		if err := f.gate.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
		close(done)
	}()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		got, _ := f.db.GetRequest(t.Context(), r.ID)
		if got.State == approval.StateExpired {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("sweeper never expired the abandoned request")
}
