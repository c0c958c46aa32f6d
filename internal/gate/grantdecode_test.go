package gate

import (
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// recordingPolicy is a compiled policy that keeps, per evaluation, the
// Decoded it was handed and the one its decision carried.
type recordingPolicy struct {
	e        *policy.Evaluator
	mu       sync.Mutex
	in, outs []*policy.Decoded
}

// Revision makes it revisioned, as policy.Holder is: a hand-off's
// decision is then the admission's.
func (r *recordingPolicy) Revision() string { return r.e.Revision() }

func (r *recordingPolicy) Evaluate(c policy.Call) (policy.Decision, error) {
	d, err := r.e.Evaluate(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.in, r.outs = append(r.in, c.Decoded), append(r.outs, d.Decoded)
	return d, err
}

// TestGrantCheckReadsTheAdmissionsDecode (args29): a held call's grant
// check evaluates the policy again with the grants; the arguments the
// admission's evaluation decoded for a rule's condition are handed to it
// (Call.Decoded), so they are decoded once per call, not twice.
func TestGrantCheckReadsTheAdmissionsDecode(t *testing.T) {
	p := retryPolicy(time.Hour)
	p.Rules = append(p.Rules, policy.Rule{Name: "watched writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve, When: `args.path != ""`})
	e, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingPolicy{e: e}
	clk := newClock()
	db := sqlitetest.Open(t)
	f := &fixture{db: db, gate: New(db, rec, &Options{Now: clk.now, RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})}
	watch(t, db, f.gate)
	g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{When: `args.path.startsWith("/tmp/")`, TTL: time.Hour})

	rec.mu.Lock()
	rec.in, rec.outs = nil, nil
	rec.mu.Unlock()
	for i, admit := range []func(Call) Admission{
		func(c Call) Admission { return f.gate.Admit(t.Context(), c) },
		func(c Call) Admission { // the lean path: the hand-off's evaluation is the admission's
			var adm Admission
			if h := f.gate.AdmitUnlessHeld(t.Context(), &c, &adm); h != nil {
				c.Prior = h
				return f.gate.Admit(t.Context(), c)
			}
			return adm
		},
	} {
		rec.mu.Lock()
		rec.in, rec.outs = nil, nil
		rec.mu.Unlock()
		a := admit(writeArgs("/tmp/b"))
		if !a.Allowed || a.Grant != g.ID {
			t.Fatalf("call within the grant: %+v, want allowed by grant %s", a, g.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		rec.mu.Lock()
		in, outs := rec.in, rec.outs
		rec.mu.Unlock()
		if len(in) != 2 || in[0] != nil || outs[0] == nil || in[1] != outs[0] || outs[1] != outs[0] {
			t.Errorf("path %d: evaluations handed %v and gave %v; want two, the grant check's handed the admission's decode", i, in, outs)
		}
	}
}
