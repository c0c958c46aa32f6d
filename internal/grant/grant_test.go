package grant

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// pendingCall is a pending tool-call approval needing quorum approvals.
func pendingCall(quorum int) approval.Request {
	return approval.Request{
		ID: "01900000-0000-7000-8000-000000000001", State: approval.StatePending, Server: "pay", Tool: "transfer",
		ArgumentsHash: "sha256:aa", Rule: "payments", RequestedBy: "agent-1", OnBehalfOf: "carol", Tenant: "acme",
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), RequiredApprovals: quorum,
	}
}

var (
	alice = approval.Reviewer{ID: "alice", Groups: []string{"ops"}}
	bob   = approval.Reviewer{ID: "bob", Groups: []string{"ops", "fin"}}
	hour  = approval.GrantTerms{When: "args.amount <= 100", TTL: time.Hour, MaxUses: 5}
)

func TestFromApprovalOneApprover(t *testing.T) {
	r := pendingCall(1)
	if err := r.ApproveWithGrant(alice, "routine", "", hour, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	g, ok, err := FromApproval("g1", r)
	if err != nil || !ok {
		t.Fatalf("FromApproval = %v, %v", ok, err)
	}
	want := Grant{
		ID: "g1", Principal: "agent-1", OnBehalfOf: "carol", Tenant: "acme", Server: "pay", Tool: "transfer",
		When: "args.amount <= 100", CreatedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour + time.Minute), MaxUses: 5,
		CreatedBy: "alice", ApprovedBy: []Approver{{ID: "alice", Groups: []string{"ops"}}}, Approvals: 1,
		Reason: "routine", SourceApproval: r.ID, Rule: "payments",
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("grant (-want +got):\n%s", diff)
	}
}

// TestFromApprovalQuorum: a grant on an approval needing two approvals is
// made only when both approvers attached the same terms; the approver who
// settles it decides whether there is a grant at all.
func TestFromApprovalQuorum(t *testing.T) {
	cases := []struct {
		name      string
		first     *approval.GrantTerms // alice's terms (nil: a plain approve)
		second    *approval.GrantTerms // bob's, who settles
		wantOK    bool
		wantErr   error
		wantNames string // in the error
	}{
		{"both attach the same terms", &hour, &hour, true, nil, ""},
		{"the first approved without them", nil, &hour, false, ErrNotEndorsed, "alice approved without them"},
		// newuser48: this said "alice approved without them".
		{"the first attached other terms", &approval.GrantTerms{TTL: 2 * time.Hour}, &hour, false, ErrNotEndorsed, "; alice attached other terms (duration, uses or condition)"},
		{"the settling approver attaches none", &hour, nil, false, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := pendingCall(2)
			review := func(rv approval.Reviewer, terms *approval.GrantTerms, at time.Time) {
				t.Helper()
				var err error
				if terms != nil {
					err = r.ApproveWithGrant(rv, "", "", *terms, at)
				} else {
					err = r.Review(rv, approval.VerdictApprove, "", "", at)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			review(alice, tc.first, t0.Add(time.Minute))
			if g, ok, err := FromApproval("g1", r); ok || err != nil {
				t.Fatalf("FromApproval while pending = %+v, %v, %v; want nothing", g, ok, err)
			}
			review(bob, tc.second, t0.Add(2*time.Minute))
			g, ok, err := FromApproval("g1", r)
			if ok != tc.wantOK || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("FromApproval = %v, %v; want %v, %v", ok, err, tc.wantOK, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantNames) {
				t.Errorf("error %q does not name %q", err, tc.wantNames)
			}
			if ok {
				if g.Approvals != 2 || len(g.ApprovedBy) != 2 || g.CreatedBy != "bob" || !g.CreatedAt.Equal(t0.Add(2*time.Minute)) {
					t.Errorf("grant = %+v, want approved by alice and bob, created by bob at the decision", g)
				}
			}
		})
	}
}

func TestApproveWithGrantRefusesPolicyApprovals(t *testing.T) {
	r := pendingCall(1)
	r.Kind, r.Server, r.Tool = approval.KindPolicyChange, "", ""
	if err := r.ApproveWithGrant(alice, "", "", hour, t0); !errors.Is(err, approval.ErrGrantKind) {
		t.Fatalf("ApproveWithGrant on a policy change = %v, want ErrGrantKind", err)
	}
	if len(r.Reviews) != 0 || r.State != approval.StatePending {
		t.Errorf("the refused review changed the request: %+v", r)
	}
}

func TestCheckTerms(t *testing.T) {
	max := 24 * time.Hour
	cases := []struct {
		terms approval.GrantTerms
		want  string // substring of the error, "" for valid
	}{
		{approval.GrantTerms{TTL: time.Hour}, ""},
		{approval.GrantTerms{TTL: max, MaxUses: 3}, ""},
		{approval.GrantTerms{TTL: max + time.Second}, "above grants.max_ttl 24h0m0s; it is refused, not shortened"},
		{approval.GrantTerms{}, "must be positive"},
		{approval.GrantTerms{TTL: -time.Minute}, "must be positive"},
		{approval.GrantTerms{TTL: time.Hour, MaxUses: -1}, "must not be negative"},
	}
	for _, tc := range cases {
		err := CheckTerms(tc.terms, max)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckTerms(%+v) = %v, want nil", tc.terms, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckTerms(%+v) = %v, want ErrInvalid with %q", tc.terms, err, tc.want)
		}
	}
}

func TestState(t *testing.T) {
	g := Grant{ExpiresAt: t0.Add(time.Hour), MaxUses: 2, Uses: 1}
	cases := []struct {
		name string
		mod  func(*Grant)
		at   time.Time
		want State
	}{
		{"active", func(*Grant) {}, t0, StateActive},
		{"at the expiry", func(*Grant) {}, t0.Add(time.Hour), StateExpired},
		{"used up", func(g *Grant) { g.Uses = 2 }, t0, StateExhausted},
		{"no cap", func(g *Grant) { g.MaxUses, g.Uses = 0, 1000 }, t0, StateActive},
		{"revoked wins", func(g *Grant) { g.RevokedAt, g.Uses = t0, 2 }, t0.Add(2 * time.Hour), StateRevoked},
	}
	for _, tc := range cases {
		c := g
		tc.mod(&c)
		if got := c.State(tc.at); got != tc.want || c.Usable(tc.at) != (tc.want == StateActive) {
			t.Errorf("%s: State = %s, Usable = %v; want %s", tc.name, got, c.Usable(tc.at), tc.want)
		}
	}
}
