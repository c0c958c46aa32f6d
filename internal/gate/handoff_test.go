package gate

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/telemetry"
)

// countingHolder is a policy.Holder that counts its evaluations.
type countingHolder struct {
	*policy.Holder
	n atomic.Int64
}

func (c *countingHolder) Evaluate(pc policy.Call) (policy.Decision, error) {
	c.n.Add(1)
	return c.Holder.Evaluate(pc)
}

// handOffFixture is a gate over a revisioned, counting policy (testPolicy),
// with metrics and an audit Recorder.
func handOffFixture(t *testing.T) (*fixture, *countingHolder, *prometheus.Registry, *decisions) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &decisions{}
	f := newFixture(t, time.Minute, &Options{Metrics: telemetry.NewMetrics(reg), Recorder: rec})
	pol := &countingHolder{Holder: policy.NewHolder(testPolicy(time.Minute))}
	f.gate = New(f.db, pol, &f.gate.opts)
	watch(t, f.db, f.gate)
	return f, pol, reg, rec
}

// TestAdmitUnlessHeldDecidesAllowedAndDenied: an allowed and a denied call
// are decided in place, with one evaluation each, counted and recorded as
// Admit does, and the refusal is Admit's.
func TestAdmitUnlessHeldDecidesAllowedAndDenied(t *testing.T) {
	f, pol, reg, rec := handOffFixture(t)
	read := Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/a"}`)}
	var adm Admission
	if h := f.gate.AdmitUnlessHeld(t.Context(), &read, &adm); h != nil {
		t.Fatalf("allowed call handed off: %+v", h)
	}
	if !adm.Allowed {
		t.Fatalf("allowed call refused: %+v", adm)
	}
	adm.Finish(t.Context(), approval.OutcomeOK)
	del := Call{Principal: agent, Server: "fs", Tool: "delete_file", Arguments: json.RawMessage(`{"path":"/a"}`)}
	var refused Admission
	if h := f.gate.AdmitUnlessHeld(t.Context(), &del, &refused); h != nil {
		t.Fatalf("denied call handed off: %+v", h)
	}
	if want := f.gate.Admit(t.Context(), del); refused.Allowed || refused.Message != want.Message {
		t.Fatalf("refusal %+v, want Admit's %+v", refused, want)
	}
	if n := pol.n.Load(); n != 3 { // read, delete, and Admit's delete
		t.Errorf("%d evaluations, want 3", n)
	}
	if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": "allow"}); got != 1 {
		t.Errorf("allowed calls counted %v, want 1", got)
	}
	if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": "deny"}); got != 2 {
		t.Errorf("denied calls counted %v, want 2", got)
	}
	if got := rec.take(); len(got) != 3 || !got[0].Allowed || got[0].Rule != "reads" || got[1].Allowed || got[1].Rule != "no deletes" {
		t.Errorf("audit records %+v, want read allowed by reads, then two deletes denied", got)
	}
}

// TestAdmitUnlessHeldHandsOffAHold: a call the policy holds is handed off
// before anything is made for it (no request, count or record), and the
// Admit it is handed to holds it on the decision carried, without a
// second evaluation, and counts it once; approved, it runs.
func TestAdmitUnlessHeldHandsOffAHold(t *testing.T) {
	f, pol, reg, rec := handOffFixture(t)
	c := writeCall("/a")
	var adm Admission
	h := f.gate.AdmitUnlessHeld(t.Context(), &c, &adm)
	if h == nil || h.dec == nil || h.dec.Effect != policy.Approve {
		t.Fatalf("held call not handed off with its decision: %+v, admission %+v", h, adm)
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 0 {
		t.Fatalf("%d pending requests after the hand-off, want 0", n)
	}
	if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": "approve"}); got != 0 {
		t.Fatalf("handed-off call counted %v times, want 0", got)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("handed-off call recorded: %+v", got)
	}
	c.Prior = h
	ch := admitAsync(t.Context(), f.gate, c)
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("approved call refused: %+v", a)
	}
	if n := pol.n.Load(); n != 1 {
		t.Errorf("%d evaluations of a handed-off, held and approved call, want 1", n)
	}
	if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": "approve"}); got != 1 {
		t.Errorf("handed-off call counted %v times, want 1", got)
	}
}

// TestPriorOfAnotherCallOrRevisionIsNotUsed: a hand-off's decision is used
// only for the call it was taken for, under the revision in force.
func TestPriorOfAnotherCallOrRevisionIsNotUsed(t *testing.T) {
	f, pol, _, _ := handOffFixture(t)
	c := writeCall("/a")
	var adm Admission
	h := f.gate.AdmitUnlessHeld(t.Context(), &c, &adm)
	if h == nil {
		t.Fatal("held call not handed off")
	}
	// Another call naming the hand-off: its own policy decision (deny).
	del := Call{Principal: agent, Server: "fs", Tool: "delete_file", Arguments: c.Arguments, Prior: h}
	if a := f.gate.Admit(t.Context(), del); a.Allowed {
		t.Fatalf("a delete carrying a write's hand-off was admitted: %+v", a)
	}
	if n := pol.n.Load(); n != 2 {
		t.Fatalf("%d evaluations, want 2 (the delete evaluated itself)", n)
	}
	// The policy moved: the write is evaluated again and now allowed.
	p := testPolicy(time.Minute)
	p.Default = policy.Allow
	pol.Store(p)
	c.Prior = h
	if a := f.gate.Admit(t.Context(), c); !a.Allowed {
		t.Fatalf("write refused under a policy allowing it: %+v", a)
	}
	if n := pol.n.Load(); n != 3 {
		t.Errorf("%d evaluations, want 3 (the write again under the new revision)", n)
	}
}

// TestAdmitUnlessHeldHandsOffWhatIsNotPlain: a session principal's call
// and a resume are handed off without any evaluation.
func TestAdmitUnlessHeldHandsOffWhatIsNotPlain(t *testing.T) {
	f, pol, _, _ := handOffFixture(t)
	sess := agent
	sess.SessionID = "ses_1"
	for name, c := range map[string]Call{
		"session": {Principal: sess, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`)},
		"resume":  {Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`), Resume: "apr_x"},
		"defer":   {Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`), Defer: true},
	} {
		var adm Admission
		if h := f.gate.AdmitUnlessHeld(t.Context(), &c, &adm); h == nil || h.dec != nil {
			t.Errorf("%s: hand-off %+v, want one without a decision", name, h)
		}
	}
	if n := pol.n.Load(); n != 0 {
		t.Errorf("%d evaluations, want 0", n)
	}
}
