package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// financePolicy holds pay's transfer for approvals approvals of
// group:finance, and everything else for one approval of anyone.
func financePolicy(approvals int) *policy.Policy {
	return &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Hour, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
		Rules: []policy.Rule{{Name: "finance", Server: "pay", Tools: []string{"transfer"}, Effect: policy.Approve,
			Approval: &policy.Approval{Approvals: approvals, Approvers: []string{"group:finance"}}}},
	}
}

// financeTeam is three members of group:finance and an admin outside it.
var financeTeam = []Reviewer{
	{ID: "alice", Groups: []string{"finance"}},
	{ID: "bob", Groups: []string{"finance", "ops"}},
	{ID: "carol", Groups: []string{"finance"}},
	{ID: "dave"},
}

// TestUnreachableQuorumIsRefused (quorum49): a call whose approval fewer
// of the configured reviewers may review than its quorum (the rule's
// approvers, less the caller and the person it acts for, less reviewers
// of another tenant) is refused at once with a reason naming the rule,
// the quorum and the count, recorded with CodeQuorumUnreachable, and
// leaves no request behind. One the reviewers can reach, or with no
// roster (Options.Reviewers nil: not known here), is held as before.
func TestUnreachableQuorumIsRefused(t *testing.T) {
	transfer := func(p approval.Principal) Call {
		return Call{Principal: p, Server: "pay", Tool: "transfer", Arguments: []byte(`{"amount":10}`), ToolDigest: "sha256:d1"}
	}
	forAlice := approval.Principal{ID: "agent-1", Kind: "agent", OnBehalfOf: "alice"}
	tests := []struct {
		name      string
		roster    []Reviewer
		approvals int
		call      Call
		want      string // "" held; else the refusal's text
	}{
		{name: "acting for a member of the group", roster: financeTeam, approvals: 3, call: transfer(forAlice),
			want: `denied: rule "finance" needs 3 approvals from group:finance; only 2 of its 3 configured approver(s) may review a request by agent-1 acting for alice`},
		{name: "acting for a member, written in another case", roster: financeTeam, approvals: 3,
			call: transfer(approval.Principal{ID: "agent-1", OnBehalfOf: "ALICE"}),
			want: `only 2 of its 3 configured approver(s) may review a request by agent-1 acting for ALICE`},
		{name: "the agent is a member itself", roster: financeTeam, approvals: 3,
			call: transfer(approval.Principal{ID: "carol"}), want: `only 2 of its 3 configured approver(s) may review a request by carol (`},
		{name: "a member of another tenant", approvals: 2, call: transfer(approval.Principal{ID: "agent-1", Tenant: "acme"}),
			roster: []Reviewer{{ID: "alice", Groups: []string{"finance"}, Tenant: "acme"}, {ID: "bob", Groups: []string{"finance"}, Tenant: "globex"}},
			want:   `needs 2 approvals from group:finance; only 1 of its 1 configured approver(s) may review`},
		{name: "any approver, only the one it acts for", roster: []Reviewer{{ID: "alice"}},
			call: Call{Principal: forAlice, Server: "fs", Tool: "write_file", Arguments: []byte(`{}`)},
			want: `denied: the policy's default needs 1 approval from any approver; only 0 of its 1 configured approver(s) may review a request by agent-1 acting for alice`},
		{name: "acting for someone outside the group", roster: financeTeam, approvals: 3,
			call: transfer(approval.Principal{ID: "agent-1", OnBehalfOf: "dave"})},
		{name: "a quorum the others reach", roster: financeTeam, approvals: 2, call: transfer(forAlice)},
		{name: "a tenant-less reviewer reviews every tenant", approvals: 1, roster: []Reviewer{{ID: "bob", Groups: []string{"finance"}}},
			call: transfer(approval.Principal{ID: "agent-1", Tenant: "acme"})},
		{name: "no roster: not known here", approvals: 3, call: transfer(forAlice)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &decisions{}
			f := newFixture(t, time.Hour, &Options{Reviewers: tt.roster, Recorder: rec})
			if tt.approvals > 0 {
				f.pol.p.Store(financePolicy(tt.approvals))
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(errors.New("test over"))
			ch := admitAsync(ctx, f.gate, tt.call)
			if tt.want == "" {
				if r := waitPending(t, f.db, 1)[0]; r.RequiredApprovals != max(tt.approvals, 1) {
					t.Errorf("held for %d approvals, want %d", r.RequiredApprovals, tt.approvals)
				}
				return
			}
			a := recv(t, ch)
			if a.Allowed || !strings.Contains(a.Message, tt.want) || a.Code != CodeQuorumUnreachable {
				t.Fatalf("admission %+v, want refused with code %q and a reason containing %q", a, CodeQuorumUnreachable, tt.want)
			}
			if !strings.HasSuffix(a.Message, "nothing was held or run") {
				t.Errorf("reason %q does not say nothing was held", a.Message)
			}
			if n, err := f.db.CountPending(t.Context(), ""); err != nil || n != 0 {
				t.Errorf("pending requests after the refusal: %d (%v), want 0", n, err)
			}
			got := rec.take()
			if len(got) != 1 || got[0].Allowed || got[0].Code != CodeQuorumUnreachable || got[0].Reason != a.Message || got[0].Rule == "" {
				t.Errorf("recorded %+v, want one refusal with code %q, the agent's reason and the rule", got, CodeQuorumUnreachable)
			}
		})
	}
}

// TestSessionWarningsNameUnreachableQuorums (quorum49): a session created
// for a member of group:finance is warned about the finance rule its
// requests can never get 3 approvals for (and about nothing the others
// reach); one for someone else, or with the reviewers unknown, is not.
// The session is created all the same.
func TestSessionWarningsNameUnreachableQuorums(t *testing.T) {
	host := approval.Principal{ID: "host-app", Kind: "human"}
	for _, tt := range []struct {
		name     string
		roster   []Reviewer
		behalfOf string
		want     []string
	}{
		{name: "acting for a member", roster: financeTeam, behalfOf: "alice",
			want: []string{`rule "finance" needs 3 approvals from group:finance; only 2 of its 3 configured approver(s) may review a request by session:`}},
		{name: "acting for someone else", roster: financeTeam, behalfOf: "dave"},
		{name: "acting for nobody", roster: financeTeam},
		{name: "reviewers unknown", behalfOf: "alice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := sqlitetest.Open(t)
			g := New(db, policy.NewHolder(financePolicy(3)), &Options{Reviewers: tt.roster})
			s, _, err := g.CreateSession(t.Context(), host, session.NewSession{OnBehalfOf: tt.behalfOf})
			if err != nil {
				t.Fatalf("CreateSession: %v (a session is warned about, never refused)", err)
			}
			got := g.SessionWarnings(s)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) || !strings.Contains(got[i], " acting for "+tt.behalfOf+" ") {
					t.Errorf("warning %q, want it to start %q and name %s", got[i], w, tt.behalfOf)
				}
			}
		})
	}
}

// BenchmarkQuorumOf is the count a call about to be held now pays
// (quorumOf), for the four-person finance team and for a roster of 200
// reviewers in 10 groups.
//
//	go test -run '^$' -bench QuorumOf ./internal/gate/
func BenchmarkQuorumOf(b *testing.B) {
	big := make([]Reviewer, 200)
	for i := range big {
		big[i] = Reviewer{ID: fmt.Sprintf("r%03d", i), Groups: []string{fmt.Sprintf("g%d", i%10), "staff"}}
	}
	p := approval.Principal{ID: "agent-1", OnBehalfOf: "r007"}
	for _, tt := range []struct {
		name   string
		roster []Reviewer
		ap     policy.Approval
	}{
		{"team=4", financeTeam, policy.Approval{Approvals: 3, Approvers: []string{"group:finance"}}},
		{"roster=200", big, policy.Approval{Approvals: 3, Approvers: []string{"group:g7"}}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			g := New(nil, &swappable{}, &Options{Reviewers: tt.roster})
			b.ReportAllocs()
			for b.Loop() {
				if q, _ := quorumOf(g.opts.Reviewers, p, tt.ap); q.need != 3 {
					b.Fatal(q)
				}
			}
		})
	}
}
