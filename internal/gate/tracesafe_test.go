package gate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// panicProcessor is a span processor (a stand-in for a buggy exporter)
// that panics, while armed, in OnStart of spans named start or in OnEnd
// of every span when end is set.
type panicProcessor struct {
	start atomic.Pointer[string]
	end   atomic.Bool
	hits  atomic.Int32
}

func (p *panicProcessor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if n := p.start.Load(); n != nil && *n == s.Name() {
		p.hits.Add(1)
		panic("attack14: in the span processor's OnStart")
	}
}

func (p *panicProcessor) OnEnd(sdktrace.ReadOnlySpan) {
	if p.end.Load() {
		p.hits.Add(1)
		panic("attack14: in the span processor's OnEnd")
	}
}

func (p *panicProcessor) Shutdown(context.Context) error   { return nil }
func (p *panicProcessor) ForceFlush(context.Context) error { return nil }

// admitRecovered is admitAsync that also delivers a panic of AdmitTo.
func admitRecovered(ctx context.Context, g *Gate, c Call) (<-chan *Admission, <-chan any) {
	got, panicked := make(chan *Admission, 1), make(chan any, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				panicked <- v
			}
		}()
		adm := new(Admission)
		g.AdmitTo(ctx, &c, adm)
		got <- adm
	}()
	return got, panicked
}

// TestTracerPanicsDoNotEndCalls: a tracer whose span processor panics (a
// buggy exporter) as a held call's approval wait begins, at a span's
// end, or as a call's span starts, neither ends the admission nor loses
// the call: AdmitTo panicked on the caller's goroutine (on the SDK path
// the go-sdk's handler goroutines have no recover: the process ended),
// and the panic at the wait's start left the pending request's lease held
// by this process with no call waiting on it. Now each call is decided and
// recorded as without a tracer, on both stores.
func TestTracerPanicsDoNotEndCalls(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pp := &panicProcessor{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(pp))
		f := newFixtureOn(t, db, time.Hour, &Options{Tracer: tp.Tracer("test")})
		g := f.gate
		for i, c := range []struct {
			name       string
			start      string
			end        bool
			verdict    approval.Verdict
			wantAllow  bool
			wantRecord approval.Outcome
		}{
			{name: "wait start, approved", start: "approval wait", verdict: approval.VerdictApprove, wantAllow: true, wantRecord: approval.OutcomeOK},
			{name: "call start, approved", start: "tools/call fs__write_file", verdict: approval.VerdictApprove, wantAllow: true, wantRecord: approval.OutcomeOK},
			{name: "ends, approved", end: true, verdict: approval.VerdictApprove, wantAllow: true, wantRecord: approval.OutcomeOK},
			{name: "ends, denied", end: true, verdict: approval.VerdictDeny},
		} {
			pp.hits.Store(0)
			if c.start != "" {
				pp.start.Store(&c.start)
			}
			pp.end.Store(c.end)
			got, panicked := admitRecovered(t.Context(), g, writeCall(fmt.Sprintf("/tracer-%d", i)))
			var r approval.Request
			select {
			case v := <-panicked:
				// The request's lease stays this process's, renewed with
				// no call waiting on it.
				t.Fatalf("%s: AdmitTo panicked (%v) before the decision; leases held: %v", c.name, v, g.leases.ids())
			case r = <-waitFor(db):
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: never held", c.name)
			}
			if _, err := g.Review(t.Context(), r.ID, alice, c.verdict, "ok", ""); err != nil {
				t.Fatal(err)
			}
			var a *Admission
			select {
			case v := <-panicked:
				t.Fatalf("%s: AdmitTo panicked (%v) after the decision; leases held: %v", c.name, v, g.leases.ids())
			case a = <-got:
			}
			if a.Allowed != c.wantAllow {
				t.Fatalf("%s: answer %+v, want allowed %v", c.name, a, c.wantAllow)
			}
			if c.wantAllow {
				func() {
					defer func() {
						if v := recover(); v != nil {
							t.Fatalf("%s: Finish panicked: %v", c.name, v)
						}
					}()
					a.Finish(t.Context(), approval.OutcomeOK)
				}()
				rr, err := db.GetRequest(t.Context(), r.ID)
				if err != nil || rr.State != approval.StateConsumed || rr.DispatchOutcome != c.wantRecord {
					t.Fatalf("%s: request %s outcome %q (%v), want consumed, %s", c.name, rr.State, rr.DispatchOutcome, err, c.wantRecord)
				}
			}
			if pp.hits.Load() == 0 {
				t.Fatalf("%s: the processor never panicked", c.name)
			}
			if ids := g.leases.ids(); len(ids) != 0 {
				t.Fatalf("%s: leases still held: %v", c.name, ids)
			}
			pp.start.Store(nil)
			pp.end.Store(false)
			// Settled: the request is not pending any more.
			if rs := pendingNow(db); len(rs) != 0 {
				t.Fatalf("%s: %d requests still pending", c.name, len(rs))
			}
		}
		// An allowed call whose span's start panics is admitted.
		read := "tools/call fs__read_file"
		pp.start.Store(&read)
		a := g.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{"path":"/r"}`)})
		pp.start.Store(nil)
		if !a.Allowed || pp.hits.Load() == 0 {
			t.Fatalf("allowed read after a panic in its span's start: %+v (hits %d)", a, pp.hits.Load())
		}
	})
}

// waitFor delivers the one pending request of db once it exists.
func waitFor(db *sqlstore.DB) <-chan approval.Request {
	ch := make(chan approval.Request, 1)
	go func() {
		for range 3000 {
			if rs := pendingNow(db); len(rs) == 1 {
				ch <- rs[0]
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ch
}

// pendingNow lists db's pending requests (none if it cannot).
func pendingNow(db *sqlstore.DB) []approval.Request {
	rs, _, _ := db.ListRequests(context.Background(), store.Filter{State: approval.StatePending})
	return rs
}
