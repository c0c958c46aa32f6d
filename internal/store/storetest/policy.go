package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// policyTests are the PolicyStore conformance tests; Run runs them too.
var policyTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"PolicyAppendGet", testPolicyAppendGet},
	{"PolicyAppendConcurrentOnce", testPolicyAppendConcurrentOnce},
	{"PolicyApplyApproval", testPolicyApplyApproval},
	{"PolicyApplyApprovalMoved", testPolicyApplyApprovalMoved},
	{"PolicyApplyApprovalRefused", testPolicyApplyApprovalRefused},
}

// policyRev returns a revision holding text, made by by at t0+n minutes.
func policyRev(text, by string, n int) store.PolicyRevision {
	return store.PolicyRevision{
		Policy:    text,
		Digest:    fmt.Sprintf("%064x", len(text)*1000+n),
		CreatedAt: t0.Add(time.Duration(n)*time.Minute + 123456*time.Nanosecond),
		CreatedBy: by,
		Diff:      []string{fmt.Sprintf("change %d", n)},
	}
}

func policyEvents(evs []approval.Event) []approval.Event {
	var out []approval.Event
	for _, ev := range evs {
		if ev.Type == store.EventPolicyChanged {
			out = append(out, ev)
		}
	}
	return out
}

func testPolicyAppendGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.CurrentPolicy(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CurrentPolicy on an empty store = %v, want ErrNotFound", err)
	}
	if _, err := s.AppendPolicy(ctx, 1, policyRev("default: deny\n", "ops", 1), "ops"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("AppendPolicy(base 1) on an empty store = %v, want ErrConflict", err)
	}
	r1, err := s.AppendPolicy(ctx, 0, policyRev("default: deny\n", "ops", 1), "ops")
	if err != nil {
		t.Fatal(err)
	}
	want1 := store.NormalizePolicyRevision(policyRev("default: deny\n", "ops", 1))
	want1.Revision = 1
	if diff := cmp.Diff(want1, r1); diff != "" {
		t.Errorf("AppendPolicy returned (-want +got):\n%s", diff)
	}
	r2, err := s.AppendPolicy(ctx, 1, policyRev("default: approve\n", "alice", 2), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if r2.Revision != 2 {
		t.Errorf("second revision = %d, want 2", r2.Revision)
	}
	if _, err := s.AppendPolicy(ctx, 1, policyRev("default: allow\n", "bob", 3), "bob"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("AppendPolicy(stale base 1) = %v, want ErrConflict", err)
	}
	cur, err := s.CurrentPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r2, cur); diff != "" {
		t.Errorf("CurrentPolicy (-want +got):\n%s", diff)
	}
	got1, err := s.GetPolicy(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, got1); diff != "" {
		t.Errorf("GetPolicy(1) (-want +got):\n%s", diff)
	}
	if _, err := s.GetPolicy(ctx, 3); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetPolicy(3) = %v, want ErrNotFound", err)
	}
	evs, err := s.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []approval.Event{
		{Type: store.EventPolicyChanged, Actor: "ops", At: store.Millis(r1.CreatedAt)},
		{Type: store.EventPolicyChanged, Actor: "alice", At: store.Millis(r2.CreatedAt)},
	}
	if diff := cmp.Diff(want, policyEvents(evs), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Seq" }, cmp.Ignore())); diff != "" {
		t.Errorf("policy events (-want +got):\n%s", diff)
	}
}

func testPolicyAppendConcurrentOnce(t *testing.T, s store.Store) {
	if _, err := s.AppendPolicy(t.Context(), 0, policyRev("default: deny\n", "ops", 1), "ops"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := range n {
		wg.Go(func() {
			_, err := s.AppendPolicy(t.Context(), 1, policyRev("default: approve\n", fmt.Sprint("admin", i), i+2), "x")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("AppendPolicy = %v, want nil or ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d concurrent appends on base 1 succeeded, want exactly 1", wins)
	}
	if cur, err := s.CurrentPolicy(t.Context()); err != nil || cur.Revision != 2 {
		t.Errorf("CurrentPolicy = %d, %v; want revision 2", cur.Revision, err)
	}
}

// policyApproval creates an approved policy_change approval on base for rev,
// requested by "alice" and approved by "bob".
func policyApproval(t *testing.T, s store.Store, i approval.ID, base int64, rev store.PolicyRevision) approval.Request {
	t.Helper()
	r := pending(i)
	r.Server, r.Tool, r.ToolDigest = "", "", ""
	r.Kind, r.Target, r.BaseRevision = approval.KindPolicyChange, "deployment", base
	r.Arguments = []byte(`{"policy":"x"}`)
	r.ArgumentsHash = rev.Digest
	r.RequestedBy, r.OnBehalfOf = "alice", ""
	mustCreate(t, s, r)
	return mustUpdate(t, s, i, "bob", func(r *approval.Request) error {
		return r.Review(reviewer("bob"), approval.VerdictApprove, "", "", t0.Add(time.Minute))
	})
}

func testPolicyApplyApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.AppendPolicy(ctx, 0, policyRev("default: deny\n", "ops", 1), "ops"); err != nil {
		t.Fatal(err)
	}
	rev := policyRev("default: approve\n", "alice", 2)
	policyApproval(t, s, id(50, 1), 1, rev)
	now := t0.Add(2 * time.Minute)
	got, req, err := s.ApplyPolicyApproval(ctx, id(50, 1), rev, "bob", now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 2 || got.ApprovalID != id(50, 1) || got.Digest != rev.Digest {
		t.Errorf("ApplyPolicyApproval = revision %d, approval %q, digest %q; want 2, %s, %s", got.Revision, got.ApprovalID, got.Digest, id(50, 1), rev.Digest)
	}
	if req.State != approval.StateConsumed || !req.ConsumedAt.Equal(now) {
		t.Errorf("approval after apply: state %s consumed at %v, want consumed at %v", req.State, req.ConsumedAt, now)
	}
	if stored := mustGet(t, s, id(50, 1)); stored.State != approval.StateConsumed {
		t.Errorf("stored approval state %s, want consumed", stored.State)
	}
	if cur, err := s.CurrentPolicy(ctx); err != nil || cur.Revision != 2 || cur.ApprovalID != id(50, 1) {
		t.Errorf("CurrentPolicy = %+v, %v; want revision 2 through the approval", cur, err)
	}
	// A second apply finds it consumed: nothing more applies.
	if _, _, err := s.ApplyPolicyApproval(ctx, id(50, 1), rev, "bob", now); !errors.Is(err, approval.ErrNotApproved) {
		t.Errorf("second ApplyPolicyApproval = %v, want ErrNotApproved", err)
	}
	if cur, _ := s.CurrentPolicy(ctx); cur.Revision != 2 {
		t.Errorf("after a second apply the revision is %d, want 2", cur.Revision)
	}
	evs, err := s.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consumed int
	for _, ev := range evs {
		if ev.RequestID == id(50, 1) && ev.Type == approval.EventConsumed {
			consumed++
		}
	}
	if consumed != 1 || len(policyEvents(evs)) != 2 {
		t.Errorf("events: %d consumed, %d policy_changed; want 1 and 2", consumed, len(policyEvents(evs)))
	}
}

func testPolicyApplyApprovalMoved(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.AppendPolicy(ctx, 0, policyRev("default: deny\n", "ops", 1), "ops"); err != nil {
		t.Fatal(err)
	}
	rev := policyRev("default: approve\n", "alice", 2)
	policyApproval(t, s, id(51, 1), 1, rev)
	if _, err := s.AppendPolicy(ctx, 1, policyRev("default: deny\nrules: []\n", "carol", 3), "carol"); err != nil {
		t.Fatal(err)
	}
	_, req, err := s.ApplyPolicyApproval(ctx, id(51, 1), rev, "bob", t0.Add(2*time.Minute))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ApplyPolicyApproval after the policy moved = %v, want ErrConflict", err)
	}
	wantReason := fmt.Sprintf(store.ReasonPolicyMoved, 1, 2)
	if req.State != approval.StateInvalidated || req.Reason != wantReason {
		t.Errorf("returned approval: %s %q, want invalidated %q", req.State, req.Reason, wantReason)
	}
	if stored := mustGet(t, s, id(51, 1)); stored.State != approval.StateInvalidated {
		t.Errorf("stored approval state %s, want invalidated", stored.State)
	}
	if cur, _ := s.CurrentPolicy(ctx); cur.Revision != 2 || cur.CreatedBy != "carol" {
		t.Errorf("current revision %d by %s, want 2 by carol", cur.Revision, cur.CreatedBy)
	}
}

func testPolicyApplyApprovalRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.AppendPolicy(ctx, 0, policyRev("default: deny\n", "ops", 1), "ops"); err != nil {
		t.Fatal(err)
	}
	rev := policyRev("default: approve\n", "alice", 2)
	if _, _, err := s.ApplyPolicyApproval(ctx, id(52, 9), rev, "bob", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown approval: %v, want ErrNotFound", err)
	}
	// A pending approval does not apply and is left pending.
	p := pending(id(52, 1))
	p.Kind, p.Target, p.BaseRevision, p.ArgumentsHash = approval.KindPolicyChange, "deployment", 1, rev.Digest
	mustCreate(t, s, p)
	if _, _, err := s.ApplyPolicyApproval(ctx, id(52, 1), rev, "bob", t0); !errors.Is(err, approval.ErrNotApproved) {
		t.Errorf("pending approval: %v, want ErrNotApproved", err)
	}
	if got := mustGet(t, s, id(52, 1)); got.State != approval.StatePending {
		t.Errorf("pending approval is now %s", got.State)
	}
	// A tool-call approval never applies a policy.
	mustCreate(t, s, pending(id(52, 2)))
	mustUpdate(t, s, id(52, 2), "bob", func(r *approval.Request) error {
		return r.Review(reviewer("bob"), approval.VerdictApprove, "", "", t0.Add(time.Minute))
	})
	if _, _, err := s.ApplyPolicyApproval(ctx, id(52, 2), rev, "bob", t0.Add(time.Minute)); !errors.Is(err, approval.ErrNotApproved) {
		t.Errorf("tool-call approval: %v, want ErrNotApproved", err)
	}
	// A different proposal than the one approved invalidates the approval.
	policyApproval(t, s, id(52, 3), 1, rev)
	other := policyRev("default: allow\n", "alice", 4)
	_, req, err := s.ApplyPolicyApproval(ctx, id(52, 3), other, "bob", t0.Add(2*time.Minute))
	if !errors.Is(err, approval.ErrNotApproved) || req.State != approval.StateInvalidated {
		t.Errorf("other digest: %v, state %s; want ErrNotApproved and invalidated", err, req.State)
	}
	if cur, _ := s.CurrentPolicy(ctx); cur.Revision != 1 {
		t.Errorf("current revision %d, want 1 (nothing applied)", cur.Revision)
	}
}
