package gate

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// decisions collects what the gate hands its Recorder.
type decisions struct {
	mu  sync.Mutex
	got []Decided
}

func (d *decisions) Decided(_ context.Context, x Decided) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, x)
}

func (d *decisions) take() []Decided {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.got
	d.got = nil
	return out
}

// TestRecorderSeesDecisionsWithoutApproval: allowed and refused calls
// (by rule, and by an evaluation error before any rule) reach the
// Recorder with their rule and reason; a call held and approved does not
// (its events are in the store), unless monitor mode had a verdict on it.
func TestRecorderSeesDecisionsWithoutApproval(t *testing.T) {
	rec := &decisions{}
	yes := true
	f := newFixture(t, time.Minute, &Options{Recorder: rec})
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "watch writes", Tools: []string{"write_*"}, Effect: policy.Deny, Monitor: &yes})
	f.pol.p.Store(p)
	ctx := t.Context()

	read := Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/a"}`)}
	if !f.gate.Admit(ctx, read).Allowed {
		t.Fatal("read refused")
	}
	del := Call{Principal: agent, Server: "fs", Tool: "delete_file", Arguments: json.RawMessage(`{"path":"/a"}`)}
	if f.gate.Admit(ctx, del).Allowed {
		t.Fatal("delete allowed")
	}
	bogus := Call{Principal: agent, Kind: "bogus", Server: "fs", Tool: "x", Arguments: json.RawMessage(`{}`)}
	if f.gate.Admit(ctx, bogus).Allowed {
		t.Fatal("bogus kind allowed")
	}
	got := rec.take()
	if len(got) != 3 {
		t.Fatalf("recorded %d decisions, want 3: %+v", len(got), got)
	}
	if d := got[0]; !d.Allowed || d.Rule != "reads" || d.Tool != "read_file" || string(d.Arguments) != `{"path":"/a"}` || d.At.IsZero() {
		t.Errorf("allowed: %+v", d)
	}
	if d := got[1]; d.Allowed || d.Rule != "no deletes" || d.Reason == "" {
		t.Errorf("denied: %+v", d)
	}
	if d := got[2]; d.Allowed || d.Rule != "" || d.Reason != "denied: policy evaluation failed" {
		t.Errorf("evaluation error: %+v", d)
	}

	// Held (the default approves) and approved: a monitor verdict only.
	ch := admitAsync(ctx, f.gate, writeCall("/b"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(ctx, r.ID, approval.Principal{ID: "alice", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	adm := <-ch
	if !adm.Allowed {
		t.Fatalf("held call refused: %s", adm.Message)
	}
	adm.Finish(ctx, approval.OutcomeOK)
	got = rec.take()
	if len(got) != 1 || got[0].ApprovalID != r.ID || got[0].Monitor.Verdict != policy.WouldDeny || got[0].Monitor.Rule != "watch writes" {
		t.Fatalf("held call with a monitor verdict: %+v", got)
	}
	f.pol.p.Store(testPolicy(time.Minute))
	ch = admitAsync(ctx, f.gate, writeCall("/c"))
	r = waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(ctx, r.ID, approval.Principal{ID: "alice", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if adm := <-ch; !adm.Allowed {
		t.Fatalf("held call refused: %s", adm.Message)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("held call without a verdict recorded: %+v", got)
	}
}

// TestRecorderNamesTheGrant: a call a remembered grant allows in place of
// an approval is recorded as allowed, naming the grant.
func TestRecorderNamesTheGrant(t *testing.T) {
	rec := &decisions{}
	clk := newClock()
	f := newFixture(t, time.Hour, &Options{Now: clk.now, RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour, Recorder: rec})
	f.pol.p.Store(retryPolicy(time.Hour))
	g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{When: `args.path.startsWith("/tmp/")`, TTL: time.Hour})
	rec.take()
	if a := f.gate.Admit(t.Context(), writeArgs("/tmp/b")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("call within the grant: %+v", a)
	}
	got := rec.take()
	if len(got) != 1 || !got[0].Allowed || got[0].Grant != g.ID || got[0].ApprovalID != "" || got[0].Tool != "write_file" {
		t.Fatalf("recorded %+v; want the allowed call naming grant %s", got, g.ID)
	}
}
