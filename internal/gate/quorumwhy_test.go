package gate

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
)

// TestQuorumRefusalSaysWhy (review49): the refusal of an unreachable
// quorum names the cause it has. Too few approvers configured (in the
// caller's tenant) for the rule's quorum is a configuration gap whoever
// calls, not self-review; a caller acting for nobody is told it may not
// review its own request. On f97895b4 every refusal said "(neither the
// caller nor the person it acts for may review it)", also when both may
// and the quorum is out of reach for everyone.
func TestQuorumRefusalSaysWhy(t *testing.T) {
	transfer := func(p approval.Principal) Call {
		return Call{Principal: p, Server: "pay", Tool: "transfer", Arguments: []byte(`{"amount":10}`), ToolDigest: "sha256:d1"}
	}
	tests := []struct {
		name      string
		roster    []Reviewer
		approvals int
		call      Call
		want      string
	}{
		{name: "a quorum above the group's size", roster: financeTeam, approvals: 4,
			call: transfer(approval.Principal{ID: "agent-1", OnBehalfOf: "dave"}),
			want: `only 3 of its 3 configured approver(s) may review a request by agent-1 acting for dave (fewer approvers are configured for it than its quorum, whoever calls)`},
		{name: "too few reviewers of the caller's tenant", approvals: 2,
			roster: []Reviewer{{ID: "alice", Groups: []string{"finance"}, Tenant: "acme"}, {ID: "bob", Groups: []string{"finance"}, Tenant: "globex"}},
			call:   transfer(approval.Principal{ID: "agent-1", Tenant: "acme"}),
			want:   `only 1 of its 1 configured approver(s) may review a request by agent-1 (fewer approvers who review tenant "acme" are configured for it than its quorum, whoever calls)`},
		{name: "the caller is a member, for nobody", roster: financeTeam, approvals: 3,
			call: transfer(approval.Principal{ID: "carol"}),
			want: `only 2 of its 3 configured approver(s) may review a request by carol (the caller may not review its own request)`},
		{name: "acting for a member", roster: financeTeam, approvals: 3,
			call: transfer(approval.Principal{ID: "agent-1", OnBehalfOf: "alice"}),
			want: `only 2 of its 3 configured approver(s) may review a request by agent-1 acting for alice (neither the caller nor the person it acts for may review it)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, time.Hour, &Options{Reviewers: tt.roster})
			f.pol.p.Store(financePolicy(tt.approvals))
			a := recv(t, admitAsync(t.Context(), f.gate, tt.call))
			if a.Allowed || a.Code != CodeQuorumUnreachable || !strings.Contains(a.Message, tt.want) {
				t.Fatalf("admission %q (code %q), want refused with %q", a.Message, a.Code, tt.want)
			}
		})
	}
}

// TestSessionRequireApprovalQuorum (review49): a session's own
// require_approval hold (SessionRule, the session approval parameters)
// is counted as the policy's are: a session acting for carol, the only
// configured approver, is refused at once with the code and no request;
// with a second approver its call is held.
func TestSessionRequireApprovalQuorum(t *testing.T) {
	for _, tt := range []struct {
		name    string
		roster  []Reviewer
		refused bool
	}{
		{"only the person it acts for", []Reviewer{{ID: "Carol"}}, true},
		{"another approver", []Reviewer{{ID: "carol"}, {ID: "alice"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, time.Minute, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval, Reviewers: tt.roster})
			f.pol.p.Store(allowAll())
			_, p := mustSession(t, f.gate, host, session.NewSession{
				Tools:           []string{"fs"},
				RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
			})
			ch := admitAsync(t.Context(), f.gate, sessionCall(p, "fs", "write_file"))
			if !tt.refused {
				if r := waitPending(t, f.db, 1)[0]; r.Rule != SessionRule {
					t.Errorf("held under rule %q, want %q", r.Rule, SessionRule)
				}
				return
			}
			a := recv(t, ch)
			want := `rule "` + SessionRule + `" needs 1 approval from any approver; only 0 of its 1 configured approver(s) may review a request by ` + p.ID + ` acting for carol`
			if a.Allowed || a.Code != CodeQuorumUnreachable || !strings.Contains(a.Message, want) {
				t.Fatalf("admission %q (code %q), want refused with %q", a.Message, a.Code, want)
			}
			if n, err := f.db.CountPending(t.Context(), ""); err != nil || n != 0 {
				t.Errorf("pending after the refusal: %d (%v)", n, err)
			}
		})
	}
}
