package gate

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// newGrantFixture is a gate in retry mode (calls needing approval answer at
// once) whose writes need one approval, on a settable clock.
func newGrantFixture(t *testing.T) (*fixture, *clock) {
	t.Helper()
	clk := newClock()
	f := newFixture(t, time.Hour, &Options{Now: clk.now, RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
	f.pol.p.Store(retryPolicy(time.Hour))
	return f, clk
}

var bobApprover = approval.Principal{ID: "bob-approver", Kind: "human", Groups: []string{"ops"}}

// grantVia makes a grant the way an approver does: c needs approval, the
// approver approves it with terms, and the identical re-send runs through
// that approval. It returns the grant.
func grantVia(t *testing.T, f *fixture, c Call, by approval.Principal, terms approval.GrantTerms) grant.Grant {
	t.Helper()
	first := f.gate.Admit(t.Context(), c)
	if first.Allowed || first.ApprovalID == "" {
		t.Fatalf("first call: %+v, want approval required", first)
	}
	r, g, err := f.gate.ApproveWithGrant(t.Context(), first.ApprovalID, by, "routine", "", terms)
	if err != nil || g == nil || r.State != approval.StateApproved {
		t.Fatalf("ApproveWithGrant = %s, %v, %v; want approved with a grant", r.State, g, err)
	}
	run := f.gate.Admit(t.Context(), c)
	if !run.Allowed || run.ApprovalID != first.ApprovalID || run.Grant != "" {
		t.Fatalf("re-send after approval: %+v, want it run through approval %s", run, first.ApprovalID)
	}
	run.Finish(t.Context(), approval.OutcomeOK)
	return *g
}

func writeArgs(path string) Call {
	c := writeCall(path)
	return c
}

func requests(t *testing.T, s store.Store) int {
	t.Helper()
	rs, _, err := s.ListRequests(t.Context(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

func grantNow(t *testing.T, s store.Store, id string) grant.Grant {
	t.Helper()
	g, err := s.GetGrant(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGrantStandsInForApproval: a grant allows the calls it matches
// exactly, at once and without a new approval, each use recorded with the
// arguments' hash; calls outside its predicate or past its uses need an
// approval again.
func TestGrantStandsInForApproval(t *testing.T) {
	f, _ := newGrantFixture(t)
	g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{When: `args.path.startsWith("/tmp/")`, TTL: time.Hour, MaxUses: 2})
	if g.Principal != agent.ID || g.Server != "fs" || g.Tool != "write_file" || g.Uses != 0 {
		t.Fatalf("grant = %+v", g)
	}
	before := requests(t, f.db)

	a := f.gate.Admit(t.Context(), writeArgs("/tmp/b"))
	if !a.Allowed || a.Grant != g.ID || a.ApprovalID != "" {
		t.Fatalf("call within the grant: %+v, want allowed by grant %s", a, g.ID)
	}
	if n := requests(t, f.db); n != before {
		t.Errorf("a granted call made an approval request (%d → %d)", before, n)
	}
	us, err := f.db.GrantUses(t.Context(), g.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantHash, _ := approval.Hash(writeArgs("/tmp/b").Arguments)
	if len(us) != 1 || us[0].ArgumentsHash != wantHash || us[0].Principal != agent.ID {
		t.Errorf("uses = %+v, want one by %s with hash %s", us, agent.ID, wantHash)
	}

	for _, tc := range []struct {
		name string
		c    Call
	}{
		{"outside the predicate", writeArgs("/etc/passwd")},
		{"another tool", Call{Principal: agent, Server: "fs", Tool: "move_file", Arguments: []byte(`{"path":"/tmp/x"}`)}},
		{"another principal", Call{Principal: approval.Principal{ID: "agent-2"}, Server: "fs", Tool: "write_file", Arguments: []byte(`{"path":"/tmp/x"}`)}},
		{"arguments the predicate cannot read", Call{Principal: agent, Server: "fs", Tool: "write_file", Arguments: []byte(`{"path":7}`)}},
	} {
		if a := f.gate.Admit(t.Context(), tc.c); a.Allowed || a.ApprovalID == "" {
			t.Errorf("%s: %+v, want approval required", tc.name, a)
		}
	}
	if a := f.gate.Admit(t.Context(), writeArgs("/tmp/c")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("second use: %+v", a)
	}
	if a := f.gate.Admit(t.Context(), writeArgs("/tmp/d")); a.Allowed || a.ApprovalID == "" {
		t.Errorf("third call of a two-use grant: %+v, want approval required", a)
	}
	if got := grantNow(t, f.db, g.ID); got.Uses != 2 {
		t.Errorf("uses = %d, want 2", got.Uses)
	}
}

// TestGrantOnlyReplacesApprove: deny > grant, and a policy that no longer
// routes the calls to approve makes the grant inert (allowed calls do not
// use it).
func TestGrantOnlyReplacesApprove(t *testing.T) {
	f, _ := newGrantFixture(t)
	g := grantVia(t, f, writeArgs("/a"), alice, approval.GrantTerms{TTL: time.Hour})

	deny := retryPolicy(time.Hour)
	deny.Rules = append(deny.Rules, policy.Rule{Name: "writes frozen", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Deny})
	f.pol.p.Store(deny)
	if a := f.gate.Admit(t.Context(), writeArgs("/a")); a.Allowed || !strings.Contains(a.Message, "writes frozen") {
		t.Fatalf("with a deny rule: %+v, want denied by it", a)
	}

	allow := retryPolicy(time.Hour)
	allow.Rules = append(allow.Rules, policy.Rule{Name: "writes ok", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Allow})
	f.pol.p.Store(allow)
	if a := f.gate.Admit(t.Context(), writeArgs("/a")); !a.Allowed || a.Grant != "" {
		t.Fatalf("with an allow rule: %+v, want allowed by policy, not by the grant", a)
	}
	if got := grantNow(t, f.db, g.ID); got.Uses != 0 {
		t.Errorf("uses = %d, want 0: only an approve decision uses a grant", got.Uses)
	}

	f.pol.p.Store(retryPolicy(time.Hour))
	if a := f.gate.Admit(t.Context(), writeArgs("/a")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("back to approve: %+v, want the grant", a)
	}
}

// TestGrantEndsAtExpiryAndRevocation: the clock passing the expiry, or a
// revocation, and the next call needs an approval again.
func TestGrantEndsAtExpiryAndRevocation(t *testing.T) {
	f, clk := newGrantFixture(t)
	g := grantVia(t, f, writeArgs("/a"), alice, approval.GrantTerms{TTL: 30 * time.Minute})
	clk.add(29 * time.Minute)
	if a := f.gate.Admit(t.Context(), writeArgs("/b")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("before the expiry: %+v", a)
	}
	clk.add(time.Minute)
	if a := f.gate.Admit(t.Context(), writeArgs("/c")); a.Allowed {
		t.Fatalf("at the expiry: %+v, want approval required", a)
	}

	g2 := grantVia(t, f, writeArgs("/d"), alice, approval.GrantTerms{TTL: 30 * time.Minute})
	if a := f.gate.Admit(t.Context(), writeArgs("/e")); !a.Allowed || a.Grant != g2.ID {
		t.Fatalf("fresh grant: %+v", a)
	}
	got, err := f.gate.RevokeGrant(t.Context(), alice, g2.ID, "done for today")
	if err != nil || got.State(clk.now()) != grant.StateRevoked || got.RevokedBy != alice.ID {
		t.Fatalf("RevokeGrant = %+v, %v", got, err)
	}
	if a := f.gate.Admit(t.Context(), writeArgs("/f")); a.Allowed {
		t.Fatalf("after the revocation: %+v, want approval required", a)
	}
	if _, err := f.gate.RevokeGrant(t.Context(), approval.Principal{ID: "x", Tenant: "other"}, g2.ID, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoke by another tenant = %v, want ErrNotFound", err)
	}
}

// TestGrantQuorum: a grant on an approval needing two is made only when
// both approvers attach the same terms, and stands in only for approvals
// needing at most as many approvers as approved it.
func TestGrantQuorum(t *testing.T) {
	f, _ := newGrantFixture(t)
	two := retryPolicy(time.Hour)
	two.Approval.Approvals = 2
	f.pol.p.Store(two)
	terms := approval.GrantTerms{TTL: time.Hour}

	a := f.gate.Admit(t.Context(), writeArgs("/q1"))
	if _, g, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, alice, "", "", terms); err != nil || g != nil {
		t.Fatalf("first of two: grant %v, %v; want pending, no grant yet", g, err)
	}
	other := terms
	other.MaxUses = 3
	if _, _, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "", "", other); !errors.Is(err, grant.ErrNotEndorsed) {
		t.Fatalf("second with other terms = %v, want ErrNotEndorsed", err)
	}
	if r, _ := f.db.GetRequest(t.Context(), a.ApprovalID); r.State != approval.StatePending || len(r.Reviews) != 1 {
		t.Fatalf("after the refused review: %s with %d reviews, want pending with alice's only", r.State, len(r.Reviews))
	}
	r, g, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "", "", terms)
	if err != nil || g == nil || r.State != approval.StateApproved || len(g.ApprovedBy) != 2 || g.Approvals != 2 {
		t.Fatalf("second with the same terms: %s, %+v, %v", r.State, g, err)
	}
	if a := f.gate.Admit(t.Context(), writeArgs("/q2")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("call under a grant approved by two: %+v", a)
	}
	three := retryPolicy(time.Hour)
	three.Approval.Approvals = 3
	f.pol.p.Store(three)
	if a := f.gate.Admit(t.Context(), writeArgs("/q3")); a.Allowed {
		t.Fatalf("a rule now needing three: %+v, want approval required", a)
	}

	// A plain approve settling it makes no grant.
	if _, err := f.gate.RevokeGrant(t.Context(), alice, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	f.pol.p.Store(two)
	b := f.gate.Admit(t.Context(), writeArgs("/q4"))
	if _, _, err := f.gate.ApproveWithGrant(t.Context(), b.ApprovalID, alice, "", "", terms); err != nil {
		t.Fatal(err)
	}
	if r, err := f.gate.Review(t.Context(), b.ApprovalID, bobApprover, approval.VerdictApprove, "", ""); err != nil || r.State != approval.StateApproved {
		t.Fatalf("plain second approve: %s, %v", r.State, err)
	}
	gs, _, err := f.db.ListGrants(t.Context(), store.GrantFilter{})
	if err != nil || len(gs) != 1 {
		t.Errorf("grants = %d, %v; want only the one both approvers attached", len(gs), err)
	}
}

func TestGrantTermsRefused(t *testing.T) {
	f, _ := newGrantFixture(t)
	a := f.gate.Admit(t.Context(), writeArgs("/t"))
	for _, tc := range []struct {
		terms approval.GrantTerms
		want  string
	}{
		{approval.GrantTerms{TTL: 3 * time.Hour}, "above grants.max_ttl 2h0m0s; it is refused, not shortened"},
		{approval.GrantTerms{TTL: 0}, "must be positive"},
		{approval.GrantTerms{TTL: time.Hour, When: "args.path >"}, "when:"},
		{approval.GrantTerms{TTL: time.Hour, When: "principal.id"}, "must evaluate to a bool"},
		{approval.GrantTerms{TTL: time.Hour, When: "principal.grups == []"}, "when:"},
	} {
		_, _, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, alice, "", "", tc.terms)
		if !errors.Is(err, grant.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("terms %+v: %v, want ErrInvalid with %q", tc.terms, err, tc.want)
		}
	}
	if r, _ := f.db.GetRequest(t.Context(), a.ApprovalID); r.State != approval.StatePending || len(r.Reviews) != 0 {
		t.Errorf("refused terms recorded something: %s, %d reviews", r.State, len(r.Reviews))
	}
}

// TestGrantSessions: a grant stands in for the approval a session's
// require_approval asks for, but never for a tool the session excludes.
func TestGrantSessions(t *testing.T) {
	clk := newClock()
	holder := policy.NewHolder(allowAll())
	db := newFixture(t, time.Minute, nil).db
	sessAp := allowAll().Approval
	sessAp.Mode = policy.ModeRetry
	g := New(db, holder, &Options{Now: clk.now, ServerExists: knownServers, SessionApproval: sessAp, RetryWait: time.Nanosecond})
	f := &fixture{db: db, gate: g}
	s, p := mustSession(t, g, host, session.NewSession{
		Tools:           []string{"fs"},
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
	})
	c := sessionCall(p, "fs", "write_file")
	gr := grantVia(t, f, c, alice, approval.GrantTerms{TTL: time.Hour})
	if gr.Principal != p.ID {
		t.Fatalf("grant principal %q, want the session's %q", gr.Principal, p.ID)
	}
	c2 := c
	c2.Arguments = []byte(`{"path":"/b"}`)
	if a := g.Admit(t.Context(), c2); !a.Allowed || a.Grant != gr.ID {
		t.Fatalf("session call under the grant: %+v", a)
	}
	// The session narrows itself to reads: the grant cannot bring writes back.
	if _, err := g.RequestSessionPolicy(t.Context(), p, s.ID, session.Change{Tools: tools("fs__read_text_file")}); err != nil {
		t.Fatal(err)
	}
	if a := g.Admit(t.Context(), c2); a.Allowed || !strings.Contains(a.Message, "outside the session's policy") {
		t.Fatalf("excluded tool with a grant: %+v, want the session exclusion", a)
	}
	if got := grantNow(t, db, gr.ID); got.Uses != 1 {
		t.Errorf("uses = %d, want 1", got.Uses)
	}
}

// TestGrantStoreErrorNeverAllows: when the grants cannot be read the call
// is not allowed (it needs an approval, which a dead store refuses).
func TestGrantStoreErrorNeverAllows(t *testing.T) {
	f, _ := newGrantFixture(t)
	grantVia(t, f, writeArgs("/a"), alice, approval.GrantTerms{TTL: time.Hour})
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	if a := f.gate.Admit(t.Context(), writeArgs("/b")); a.Allowed {
		t.Fatalf("store down: %+v, want refused", a)
	}
}

// TestGrantUsesHoldAcrossConcurrentCalls: many calls at once through two
// gates on one store never use a grant more than its max_uses.
func TestGrantUsesHoldAcrossConcurrentCalls(t *testing.T) {
	f, clk := newGrantFixture(t)
	g := grantVia(t, f, writeArgs("/a"), alice, approval.GrantTerms{TTL: time.Hour, MaxUses: 3})
	other := New(f.db, f.pol, &Options{Now: clk.now, RetryWait: time.Nanosecond})
	var (
		mu      sync.Mutex
		granted int
		wg      sync.WaitGroup
	)
	for i := range 12 {
		gate := f.gate
		if i%2 == 1 {
			gate = other
		}
		wg.Go(func() {
			a := gate.Admit(t.Context(), writeArgs(fmt.Sprintf("/c%d", i)))
			if a.Grant != "" {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 3 {
		t.Errorf("%d calls used the grant, want exactly 3 (max_uses)", granted)
	}
	if got := grantNow(t, f.db, g.ID); got.Uses != 3 {
		t.Errorf("uses = %d, want 3", got.Uses)
	}
}

// TestGrantsRememberToolCallsOnly: an approval of a resource read or a
// prompt takes no grant, and a tool grant never lets a resource read
// through, even one whose URI is spelt like the tool.
func TestGrantsRememberToolCallsOnly(t *testing.T) {
	f, _ := newGrantFixture(t)
	read := Call{Principal: agent, Kind: approval.KindResourceRead, Server: "fs", Tool: "write_file", Arguments: []byte(`{"uri":"write_file"}`)}
	a := f.gate.Admit(t.Context(), read)
	if a.Allowed || a.ApprovalID == "" {
		t.Fatalf("resource read: %+v, want approval required", a)
	}
	if _, _, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, alice, "", "", approval.GrantTerms{TTL: time.Hour}); !errors.Is(err, approval.ErrGrantKind) {
		t.Fatalf("a grant on a resource read approval = %v, want ErrGrantKind", err)
	}
	g := grantVia(t, f, writeArgs("/a"), alice, approval.GrantTerms{TTL: time.Hour})
	// Other arguments than the pending read's, so the call meets the
	// grants and not that request (whose re-send would wait on it).
	read.Arguments = []byte(`{"uri":"write_file","again":true}`)
	if a := f.gate.Admit(t.Context(), read); a.Allowed || a.Grant != "" || a.ApprovalID == "" {
		t.Fatalf("resource read named like a granted tool: %+v, want approval required", a)
	}
	if got := grantNow(t, f.db, g.ID); got.Uses != 0 {
		t.Errorf("uses = %d, want 0", got.Uses)
	}
}
