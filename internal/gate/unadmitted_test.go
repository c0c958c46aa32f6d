package gate

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// TestUnadmittedRecorded: a held call that was never admitted (its caller
// left while it waited for the gateway's admission) is one refused record
// on the audit trail, with its server, tool, principal, the reason it was
// answered and the rule of the decision its hand-off carried; nothing is
// stored for it.
func TestUnadmittedRecorded(t *testing.T) {
	rec := &decisions{}
	f := newFixture(t, time.Minute, &Options{Recorder: rec})
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "writes need a human", Tools: []string{"write_*"}, Effect: policy.Approve})
	f.pol.p.Store(p)
	ctx, cancel := context.WithCancel(t.Context())
	c := writeCall("/u")
	adm := new(Admission)
	h := f.gate.AdmitUnlessHeld(ctx, &c, adm)
	if h == nil || h.dec == nil {
		t.Fatalf("the call was decided at once (%+v), want a hand-off to hold it", adm)
	}
	c.Prior = h
	cancel()
	const reason = "refused: context canceled before the call was admitted; nothing was run"
	f.gate.Unadmitted(ctx, &c, reason)
	got := rec.take()
	if len(got) != 1 {
		t.Fatalf("recorded %d decisions, want 1: %+v", len(got), got)
	}
	if d := got[0]; d.Allowed || d.Reason != reason || d.Server != "fs" || d.Tool != "write_file" || d.Principal.ID != agent.ID ||
		d.Rule != "writes need a human" || d.ApprovalID != "" || d.At.IsZero() {
		t.Errorf("recorded %+v", d)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("%d requests stored, want none", len(all))
	}
}
