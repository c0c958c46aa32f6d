package gate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// allowAll is a deployment policy that allows everything except deletes.
func allowAll() *policy.Policy {
	return &policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
		Rules:    []policy.Rule{{Name: "no deletes", Tools: []string{"*delete*"}, Effect: policy.Deny}},
	}
}

var host = approval.Principal{ID: "host-app", Kind: "human", OnBehalfOf: "carol"}

func knownServers(s string) bool { return s == "fs" || s == "pay" }

// newSessionFixture returns a gate whose deployment allows everything but
// deletes, with servers fs and pay.
func newSessionFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, time.Minute, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval})
	f.pol.p.Store(allowAll())
	return f
}

// principalOf is the principal a session token authenticates as.
func principalOf(s session.Session) approval.Principal {
	return approval.Principal{ID: s.Principal, Kind: "agent", Tenant: s.Tenant, OnBehalfOf: s.OnBehalfOf, SessionID: string(s.ID)}
}

func mustSession(t *testing.T, g *Gate, actor approval.Principal, req session.NewSession) (session.Session, approval.Principal) {
	t.Helper()
	s, tok, err := g.CreateSession(t.Context(), actor, req)
	if err != nil {
		t.Fatalf("CreateSession = %v", err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || s.TokenHash != HashToken(tok) {
		t.Fatalf("token %q does not match the stored hash", tok)
	}
	return s, principalOf(s)
}

func sessionCall(p approval.Principal, server, tool string) Call {
	return Call{Principal: p, Server: server, Tool: tool, Arguments: []byte(`{"path":"/a"}`), ToolDigest: "sha256:d1"}
}

func TestSessionCreateNarrowing(t *testing.T) {
	f := newSessionFixture(t)
	parent, pp := mustSession(t, f.gate, host, session.NewSession{Tools: []string{"fs", "pay__refund"}})
	if parent.Mode != session.ModeExplicit || parent.OnBehalfOf != "carol" {
		t.Fatalf("parent = %+v, want explicit on behalf of carol", parent)
	}
	tests := []struct {
		name  string
		tools []string
		mode  session.Mode
		err   error
		msg   string
	}{
		{name: "narrower tool", tools: []string{"fs__read_text_file"}, mode: session.ModeExplicit},
		{name: "whole server the parent has one tool of", tools: []string{"pay"}, err: session.ErrWiden,
			msg: "child tools may only narrow the parent session tool policy: pay"},
		{name: "no tools given", tools: nil, mode: session.ModeInherited},
		{name: "no tools", tools: []string{}, mode: session.ModeExplicit},
		{name: "unknown server", tools: []string{"db"}, err: session.ErrUnknownServer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			child, _, err := f.gate.CreateSession(t.Context(), pp, session.NewSession{Tools: tc.tools})
			if !errors.Is(err, tc.err) {
				t.Fatalf("CreateSession = %v, want %v", err, tc.err)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err.Error(), tc.msg)
			}
			if err != nil {
				return
			}
			if child.Mode != tc.mode || child.ParentID != parent.ID || child.OnBehalfOf != "carol" {
				t.Errorf("child = %+v, want mode %s under %s", child, tc.mode, parent.ID)
			}
		})
	}
}

func TestSessionCallsUnderPolicy(t *testing.T) {
	f := newSessionFixture(t)
	_, pp := mustSession(t, f.gate, host, session.NewSession{Tools: []string{"fs", "pay__refund"}})
	_, none := mustSession(t, f.gate, pp, session.NewSession{Tools: []string{}})
	_, inherited := mustSession(t, f.gate, pp, session.NewSession{})
	tests := []struct {
		name         string
		p            approval.Principal
		server, tool string
		allowed      bool
		msg          string
	}{
		{"parent inside", pp, "fs", "read_text_file", true, ""},
		{"parent outside", pp, "pay", "transfer", false, "outside the session's policy"},
		{"empty child refuses everything", none, "fs", "read_text_file", false, "outside the session's policy"},
		{"inherited child inside", inherited, "pay", "refund", true, ""},
		{"inherited child outside", inherited, "pay", "transfer", false, "outside the session's policy"},
		{"deployment deny still applies", pp, "fs", "delete_file", false, `"no deletes"`},
		{"unknown session", approval.Principal{ID: "session:x", Kind: "agent", SessionID: "0190ffff-0000-7000-8000-000000000404"}, "fs", "read_text_file", false, "unknown session"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := f.gate.Admit(t.Context(), sessionCall(tc.p, tc.server, tc.tool))
			if a.Allowed != tc.allowed || !strings.Contains(a.Message, tc.msg) {
				t.Errorf("Admit = %+v, want allowed %v with %q", a, tc.allowed, tc.msg)
			}
		})
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 0 {
		t.Errorf("%d pending requests, want 0: an exclusion never asks for approval", n)
	}
}

func TestSessionRequirementIsAUnionAndHolds(t *testing.T) {
	f := newSessionFixture(t)
	parent, pp := mustSession(t, f.gate, host, session.NewSession{
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
	})
	// A child cannot switch its parent's requirement off: stating fs: false
	// is refused (it would be overridden by the union), and a child that
	// states nothing has its parent's.
	if _, _, err := f.gate.CreateSession(t.Context(), pp, session.NewSession{RequireApproval: map[string]session.Requirement{"fs": {}}}); !errors.Is(err, session.ErrWiden) {
		t.Fatalf("child stating fs: false: %v, want ErrWiden", err)
	}
	_, cp := mustSession(t, f.gate, pp, session.NewSession{})
	if a := f.gate.Admit(t.Context(), sessionCall(cp, "fs", "read_text_file")); !a.Allowed {
		t.Fatalf("read_text_file: %+v, want allowed", a)
	}
	ch := admitAsync(t.Context(), f.gate, sessionCall(cp, "fs", "write_file"))
	held := waitPending(t, f.db, 1)[0]
	if held.Rule != SessionRule || held.RequestedBy != cp.ID || held.OnBehalfOf != "carol" {
		t.Fatalf("held request %+v: want rule %q by %s on behalf of carol", held, SessionRule, cp.ID)
	}
	// Lifting the parent's requirement while the call is held does not
	// change that call: it still waits for, and gets, its decision.
	_, changed, err := f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "fs", session.Requirement{}, 1)
	if err != nil || !changed {
		t.Fatalf("SetSessionRequirement = %v, %v; want changed", changed, err)
	}
	if _, err := f.gate.Review(t.Context(), held.ID, alice, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); a.Allowed || !strings.Contains(a.Message, "denied by alice") {
		t.Fatalf("held call: %+v, want denied by alice", a)
	}
	// The next call uses the new value.
	if a := f.gate.Admit(t.Context(), sessionCall(cp, "fs", "write_file")); !a.Allowed {
		t.Fatalf("next write_file: %+v, want allowed", a)
	}
	// Unchanged writes nothing; a stale revision is refused.
	s, changed, err := f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "fs", session.Requirement{Tools: []string{}}, 2)
	if err != nil || changed || s.Revision != 2 {
		t.Errorf("unchanged SetSessionRequirement = rev %d changed %v, %v; want rev 2 unchanged", s.Revision, changed, err)
	}
	if _, _, err := f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "fs", session.Requirement{All: true}, 1); !errors.Is(err, session.ErrStaleRevision) {
		t.Errorf("stale If-Match: %v, want ErrStaleRevision", err)
	}
	if _, _, err := f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "db", session.Requirement{All: true}, 2); !errors.Is(err, session.ErrUnknownServer) {
		t.Errorf("unknown server: %v, want ErrUnknownServer", err)
	}
}

func TestSessionRevocationCancelsAndRefuses(t *testing.T) {
	f := newSessionFixture(t)
	parent, pp := mustSession(t, f.gate, host, session.NewSession{RequireApproval: map[string]session.Requirement{"pay": {All: true}}})
	_, cp := mustSession(t, f.gate, pp, session.NewSession{})
	ch := admitAsync(t.Context(), f.gate, sessionCall(cp, "pay", "refund"))
	held := waitPending(t, f.db, 1)[0]
	rev, err := f.gate.RevokeSession(t.Context(), host, parent.ID)
	if err != nil || len(rev.Sessions) != 2 || len(rev.Cancelled) != 1 || rev.Cancelled[0] != held.ID {
		t.Fatalf("RevokeSession = %+v, %v; want 2 sessions and %s cancelled", rev, err, held.ID)
	}
	// The agent learns why (newuser5: it was told only "cancelled").
	if a := recv(t, ch); a.Allowed || a.Message != store.ReasonSessionRevoked+"; nothing was run" {
		t.Fatalf("held call: %+v, want cancelled saying the session was revoked", a)
	}
	if r, _ := f.db.GetRequest(t.Context(), held.ID); r.State != approval.StateCancelled || r.Reason != store.ReasonSessionRevoked {
		t.Errorf("held request %s %q, want cancelled by revocation", r.State, r.Reason)
	} else if got, want := f.gate.StatusMessage(r), "approval "+string(held.ID)+" cancelled: the session was revoked; nothing was run"; got != want {
		// A task's statusMessage says why too (polish16: it said only "cancelled").
		t.Errorf("StatusMessage = %q, want %q", got, want)
	}
	for _, p := range []approval.Principal{pp, cp} {
		if a := f.gate.Admit(t.Context(), sessionCall(p, "fs", "read_text_file")); a.Allowed || !strings.Contains(a.Message, "revoked") {
			t.Errorf("%s after revocation: %+v, want refused as revoked", p.ID, a)
		}
	}
	if _, _, err := f.gate.CreateSession(t.Context(), cp, session.NewSession{}); !errors.Is(err, session.ErrRevoked) {
		t.Errorf("child of a revoked session: %v, want ErrRevoked", err)
	}
	use, err := f.gate.Usable(t.Context(), cp)
	if err != nil || use(approval.KindToolCall, "fs", "read_text_file") {
		t.Errorf("Usable after revocation allows fs__read_text_file (err %v)", err)
	}
}

// TestSessionRevokedBetweenApprovalAndDispatch: an approved call whose
// session is revoked before it is consumed is invalidated, not run.
func TestSessionRevokedBetweenApprovalAndDispatch(t *testing.T) {
	f := newSessionFixture(t)
	s, p := mustSession(t, f.gate, host, session.NewSession{RequireApproval: map[string]session.Requirement{"pay": {All: true}}})
	c := sessionCall(p, "pay", "refund")
	revoked := make(chan struct{})
	c.Outgoing = func() json.RawMessage {
		// Runs immediately before consume: revoke first.
		if _, err := f.gate.RevokeSession(t.Context(), host, s.ID); err != nil {
			t.Error(err)
		}
		close(revoked)
		return c.Arguments
	}
	offers := signalOffers(f.gate)
	ch := admitAsync(t.Context(), f.gate, c)
	held := waitPending(t, f.db, 1)[0]
	// The call consumes on its own after the decision (its offer to a
	// joined consume is taken; TestApprovalConsumesTheHeldCallInItsTransaction
	// covers that path).
	waitOffered(t, offers, held.ID)
	release := claimOffer(t, f.gate, held.ID)
	_, err := f.gate.Review(t.Context(), held.ID, alice, approval.VerdictApprove, "", "")
	release()
	if err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	<-revoked
	if a.Allowed || !strings.Contains(a.Message, "invalidated") || !strings.Contains(a.Message, "revoked") {
		t.Fatalf("Admit = %+v, want invalidated because the session was revoked", a)
	}
}

func TestPendingCapCoversTheSessionTree(t *testing.T) { // child sessions do not multiply the cap
	f := newFixture(t, time.Minute, &Options{ServerExists: knownServers, MaxPendingPerPrincipal: 2})
	_, rootP := mustSession(t, f.gate, host, session.NewSession{})
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(errors.New("test over"))
	admitAsync(ctx, f.gate, sessionCall(rootP, "fs", "write_file"))
	waitPending(t, f.db, 1)
	_, childP := mustSession(t, f.gate, rootP, session.NewSession{})
	c := sessionCall(childP, "fs", "write_file")
	c.Arguments = []byte(`{"path":"/b"}`)
	admitAsync(ctx, f.gate, c)
	waitPending(t, f.db, 2)
	_, grandP := mustSession(t, f.gate, childP, session.NewSession{})
	c = sessionCall(grandP, "fs", "write_file")
	c.Arguments = []byte(`{"path":"/c"}`)
	a := f.gate.Admit(t.Context(), c)
	if a.Allowed || !strings.Contains(a.Message, "max_pending_per_principal") || !strings.Contains(a.Message, "session tree") {
		t.Fatalf("third call in the tree: %+v, want a refusal naming the cap", a)
	}
}
