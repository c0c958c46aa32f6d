package gate

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFixture(t, time.Minute, &Options{Tracer: tp.Tracer("test")})
	ch := admitAsync(t.Context(), f.gate, writeCall("/s"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("%+v", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)

	attrs := map[string]map[string]string{}
	for _, s := range rec.Ended() {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		attrs[s.Name()] = m
	}
	call, wait := attrs["tools/call fs__write_file"], attrs["approval wait"]
	if call == nil || wait == nil {
		t.Fatalf("spans %v, want the call and the wait", attrs)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "write_file", "approval.id": string(r.ID), "toolgate.dispatch_outcome": "ok"} {
		if call[k] != want {
			t.Errorf("call span %s = %q, want %q", k, call[k], want)
		}
	}
	if wait["approval.id"] != string(r.ID) || wait["approval.decision"] != "approved" {
		t.Errorf("wait span %v", wait)
	}
}

func TestSpanOfAResourceRead(t *testing.T) {
	// Span names stay bounded: a resource read's span is named by method
	// and server; its URI is an attribute.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFixture(t, time.Minute, &Options{Tracer: tp.Tracer("test")})
	f.pol.p.Store(kindsPolicy()) // allows file:///a/b
	a := f.gate.Admit(t.Context(), Call{Principal: agent, Kind: approval.KindResourceRead, Server: "fs", Tool: "file:///a/b", Arguments: []byte(`{"uri":"file:///a/b"}`)})
	a.Finish(t.Context(), approval.OutcomeOK)
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "resources/read fs" {
		t.Fatalf("spans %v, want one named \"resources/read fs\"", ended)
	}
	got := map[string]string{}
	for _, kv := range ended[0].Attributes() {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	if got["mcp.resource.uri"] != "file:///a/b" || got["mcp.method.name"] != "resources/read" {
		t.Errorf("span attributes %v", got)
	}
}

// TestNoopTracerSpansBuildNothing checks that, with tracing off (the
// no-op tracer), an admission's span costs no option, attribute or
// Finish closure (issue 13: an allowed call's allocations), and that the
// span context of the caller's span is kept.
func TestNoopTracerSpansBuildNothing(t *testing.T) {
	// No watch (newFixture's): its poll allocates on its own goroutine,
	// which AllocsPerRun counts (it counts the process's allocations), and
	// under load a poll fell inside the runs now and then (fixes25: 1 in
	// 200 runs on the base).
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	f := &fixture{gate: New(sqlitetest.Open(t), pol, &Options{})}
	c := writeCall("/s")
	start := time.Now()
	if n := testing.AllocsPerRun(100, func() {
		_, span := f.gate.startAdmit(t.Context(), &c, start)
		adm := Admission{Allowed: true}
		f.gate.endAdmit(span, &adm)
		if adm.finish != nil {
			t.Fatal("a no-op span got a Finish closure")
		}
	}); n > 1 {
		t.Errorf("a no-op admission span allocated %v times, want at most 1 (the context)", n)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx, _ := f.gate.startAdmit(trace.ContextWithSpanContext(t.Context(), parent), &c, start)
	if got := trace.SpanContextFromContext(ctx); !got.Equal(parent) {
		t.Errorf("span context %v, want the caller's %v", got, parent)
	}
}

// TestNoopTracerAllowedCallAllocatesNoContext checks that the lean
// front's admission of an allowed call (AdmitUnlessHeld) with tracing
// off stores no span in a new context (issue 13): the no-op tracer's
// Start allocated a context per call for a span that records nothing.
func TestNoopTracerAllowedCallAllocatesNoContext(t *testing.T) {
	g := New(nil, policy.NewHolder(&policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "fs", Effect: policy.Allow}}}), nil)
	c := Call{Principal: approval.Principal{ID: "agent"}, Server: "fs", Tool: "read_file", Arguments: []byte(`{"path":"/r"}`)}
	var adm Admission
	ctx := t.Context()
	admit := func() {
		cc := c
		if h := g.AdmitUnlessHeld(ctx, &cc, &adm); h != nil || !adm.Allowed {
			t.Fatalf("%+v %+v", h, adm)
		}
	}
	// 3: the policy's decision and the gate's (the base also stored the
	// no-op span in a new context: 4).
	if n := testing.AllocsPerRun(200, admit); n > 3 {
		t.Errorf("an allowed call's admission with tracing off allocated %v times, want at most 3 (no context for the no-op span)", n)
	}
}
