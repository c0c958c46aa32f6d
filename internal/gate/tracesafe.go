package gate

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing that cannot end a call (branch attack14). The gate starts and
// ends spans at points where nothing recovers a panic, or where the
// recovery assumes the gate's own code panicked: a span processor or
// exporter that panics in OnStart or OnEnd (a bug outside toolgate) ended
// the process on the SDK path (the go-sdk's handler goroutines have no
// recover), and on the lean front left the call's connection dropped and,
// when it panicked as a held call's approval wait began (before holdOn's
// recovery), the request's lease held by this process for as long as it
// ran, with no call waiting on it. A safeTracer turns such a panic into an
// error log line and a span that records nothing: the call goes on,
// decided and recorded as without a tracer.

// A safeTracer is Options.Tracer with panics of its spans recovered.
type safeTracer struct {
	embedded.Tracer
	t   trace.Tracer
	log *slog.Logger
}

// newSafeTracer wraps t, unless it is the no-op tracer (which cannot
// panic, and which startAdmit recognises to build nothing).
func newSafeTracer(t trace.Tracer, log *slog.Logger) trace.Tracer {
	if _, ok := t.(noop.Tracer); ok {
		return t
	}
	return safeTracer{t: t, log: log}
}

// tracerPanicked logs the panic v of the tracer in what.
func tracerPanicked(log *slog.Logger, what string, v any) {
	log.Error("panic in the tracer; the call goes on without its span", "in", what, "panic", fmt.Sprint(v))
}

// Start implements trace.Tracer.
func (s safeTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (rctx context.Context, span trace.Span) {
	defer func() {
		if v := recover(); v != nil {
			tracerPanicked(s.log, "span start", v)
			rctx, span = ctx, noop.Span{}
		}
	}()
	sctx, sp := s.t.Start(ctx, name, opts...)
	safe := safeSpan{s: sp, log: s.log}
	return trace.ContextWithSpan(sctx, safe), safe
}

// A safeSpan is a span whose panics are recovered and logged.
type safeSpan struct {
	embedded.Span
	s   trace.Span
	log *slog.Logger
}

// recovered is deferred by each method of s.
func (s safeSpan) recovered(what string) {
	if v := recover(); v != nil {
		tracerPanicked(s.log, what, v)
	}
}

func (s safeSpan) End(options ...trace.SpanEndOption) {
	defer s.recovered("span end")
	s.s.End(options...)
}

func (s safeSpan) AddEvent(name string, options ...trace.EventOption) {
	defer s.recovered("span event")
	s.s.AddEvent(name, options...)
}

func (s safeSpan) AddLink(link trace.Link) {
	defer s.recovered("span link")
	s.s.AddLink(link)
}

func (s safeSpan) IsRecording() (rec bool) {
	defer s.recovered("span state")
	return s.s.IsRecording()
}

func (s safeSpan) RecordError(err error, options ...trace.EventOption) {
	defer s.recovered("span error")
	s.s.RecordError(err, options...)
}

func (s safeSpan) SpanContext() (sc trace.SpanContext) {
	defer s.recovered("span context")
	return s.s.SpanContext()
}

func (s safeSpan) SetStatus(code codes.Code, description string) {
	defer s.recovered("span status")
	s.s.SetStatus(code, description)
}

func (s safeSpan) SetName(name string) {
	defer s.recovered("span name")
	s.s.SetName(name)
}

func (s safeSpan) SetAttributes(kv ...attribute.KeyValue) {
	defer s.recovered("span attributes")
	s.s.SetAttributes(kv...)
}

func (s safeSpan) TracerProvider() (tp trace.TracerProvider) {
	defer s.recovered("span provider")
	return s.s.TracerProvider()
}
