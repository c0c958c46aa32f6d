package gate

import (
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestQuorumRefusalLogIsThinned (explain50): an agent retrying a call the
// gate refuses as quorum_unreachable in a loop gets a WARN line for its
// first refusal, then none for a minute, then one that counts the
// refusals since the last line; another principal refused by the same
// rule gets its own first line at once. Every call is still refused. On
// 3eefbceb each refusal wrote a line (ten here).
func TestQuorumRefusalLogIsThinned(t *testing.T) {
	var logs syncLog
	f := newFixture(t, time.Hour, &Options{Reviewers: financeTeam, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f.pol.p.Store(financePolicy(3))
	call := func(p approval.Principal) Call {
		return Call{Principal: p, Server: "pay", Tool: "transfer", Arguments: []byte(`{"amount":10}`), ToolDigest: "sha256:d1"}
	}
	forAlice := call(approval.Principal{ID: "agent-1", Kind: "agent", OnBehalfOf: "alice"})
	lines := func() []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, `msg="approval quorum unreachable; denying"`) {
				out = append(out, l)
			}
		}
		return out
	}
	refused := regexp.MustCompile(`principal=(\S+) .* refused=(\d+)`)
	counts := func() (out []string) {
		for _, l := range lines() {
			if m := refused.FindStringSubmatch(l); m != nil {
				out = append(out, m[1]+":"+m[2])
			} else {
				out = append(out, "unparsed: "+l)
			}
		}
		return out
	}
	synctest.Test(t, func(t *testing.T) {
		admit := func(c Call, n int) {
			t.Helper()
			for range n {
				if a := f.gate.Admit(t.Context(), c); a.Allowed || a.Code != CodeQuorumUnreachable {
					t.Fatalf("admission %+v, want refused with %q", a, CodeQuorumUnreachable)
				}
			}
		}
		admit(forAlice, 5)
		if got, want := counts(), []string{"agent-1:1"}; !slices.Equal(got, want) {
			t.Fatalf("after 5 refusals the log has %q, want %q", got, want)
		}
		time.Sleep(30 * time.Second)
		admit(forAlice, 3)
		admit(call(approval.Principal{ID: "carol", Kind: "agent"}), 1) // a member of finance: its own line
		if got, want := counts(), []string{"agent-1:1", "carol:1"}; !slices.Equal(got, want) {
			t.Fatalf("after 30s the log has %q, want %q", got, want)
		}
		time.Sleep(30 * time.Second) // a minute after agent-1's line
		admit(forAlice, 1)
		if got, want := counts(), []string{"agent-1:1", "carol:1", "agent-1:8"}; !slices.Equal(got, want) {
			t.Fatalf("a minute on the log has %q, want %q", got, want)
		}
		admit(forAlice, 1)
		if got := len(lines()); got != 3 {
			t.Errorf("the log has %d quorum lines right after the counted one, want 3", got)
		}
	})
}

// TestSessionWarningNamesThePolicysDefault (explain50): a session whose
// calls the policy's default would hold for an approval nobody else may
// give is warned about "the policy's default", not about a rule named
// "default" (the policy has none).
func TestSessionWarningNamesThePolicysDefault(t *testing.T) {
	db := sqlitetest.Open(t)
	g := New(db, policy.NewHolder(financePolicy(1)), &Options{Reviewers: []Reviewer{{ID: "alice"}}})
	s, _, err := g.CreateSession(t.Context(), approval.Principal{ID: "host-app", Kind: "human"}, session.NewSession{OnBehalfOf: "alice"})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	got := g.SessionWarnings(s)
	want := "the policy's default needs 1 approval from any approver; only 0 of its 1 configured approver(s) may review a request by session:"
	if !slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, want) }) || slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, `rule "default"`) }) {
		t.Errorf("warnings %q, want one starting %q and none naming rule \"default\"", got, want)
	}
}

// BenchmarkRefusalLogDue is what thinning adds to a quorum refusal: one
// (rule, principal) refused over and over (its line suppressed), as by
// an agent retrying in a loop.
func BenchmarkRefusalLogDue(b *testing.B) {
	var l refusalLog
	now := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.due("finance", "agent-1", now)
	}
}
