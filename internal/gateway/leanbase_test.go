package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"
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
