package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

type leanBaseTestKey struct{}

// A lean 2026-07-28 call's own context keeps the request's span and none
// of its other values: a held call must not keep net/http's request and
// connection contexts (their values, cancelCtx and Done channels) for as
// long as it is held (docs/performance.md, "heldmem4").
func TestLeanModernBaseKeepsOnlyTheSpan(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx, cancel := context.WithCancel(context.WithValue(trace.ContextWithSpanContext(r.Context(), sc), leanBaseTestKey{}, "v"))
	r = r.WithContext(ctx)
	base := leanModernBase(r)
	if base.Value(leanBaseTestKey{}) != nil {
		t.Error("the call's context keeps the request's values")
	}
	if base.Done() != nil {
		t.Error("the call's context derives from the request's cancellation")
	}
	if got := trace.SpanContextFromContext(base); !got.Equal(sc) {
		t.Errorf("span context %v, want the request's %v", got, sc)
	}
	cancel()
	if base.Err() != nil {
		t.Error("the request's end ended the call's context")
	}
	if plain := leanModernBase(httptest.NewRequest(http.MethodPost, "/mcp", nil)); trace.SpanContextFromContext(plain).IsValid() {
		t.Error("a request without a span gave the call one")
	}
}

// ctxGatekeeper is the gate, recording the context each call is admitted
// or held with (AdmitOrHold: the lean front's parked calls).
type ctxGatekeeper struct {
	*gate.Gate
	ctxs chan context.Context
}

func (g ctxGatekeeper) AdmitOrHold(ctx context.Context, c *gate.Call, adm *gate.Admission) (context.Context, bool) {
	g.ctxs <- ctx
	return g.Gate.AdmitOrHold(ctx, c, adm)
}

// TestLeanSessionCallKeepsNoRequestContext: a 2025-era session's call the
// lean front holds (parked) is held with a context of its own that keeps
// none of net/http's request and connection values (the local address,
// the server, the principal's value) and not their cancellation, as a
// 2026-07-28 call's (leanModernBase): on context.WithoutCancel(r.Context())
// each of 10,000 held calls kept those contexts, their Done channels,
// cancel maps and the connection's address for as long as it was held
// (docs/performance.md, "held24").
func TestLeanSessionCallKeepsNoRequestContext(t *testing.T) {
	ctxs := make(chan context.Context, 1)
	f := newLeanFixtureGK(t, nil, nil, func(gt *gate.Gate) Gatekeeper { return ctxGatekeeper{Gate: gt, ctxs: ctxs} })
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	lines := heldPOST(t, f.base, sid, version)
	ctx := <-ctxs
	for _, k := range []any{http.LocalAddrContextKey, http.ServerContextKey, httpPrincipalKey{}} {
		if v := ctx.Value(k); v != nil {
			t.Errorf("the held call's context keeps the request's %v: %v", k, v)
		}
	}
	f.waitState(t, approval.StatePending, 1)
	f.approveNext(t)
	if data, _ := answerOf(t, lines); !strings.Contains(data, `"id":"h-1"`) || strings.Contains(data, `"isError":true`) {
		t.Fatalf("answer: %s, want the call's result under id h-1", data)
	}
}
