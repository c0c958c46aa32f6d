package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingEnabled reports whether the standard OpenTelemetry environment asks
// for exported traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with
// OTEL_TRACES_EXPORTER unset. OTEL_SDK_DISABLED=true turns tracing off.
func TracingEnabled(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "otlp":
		return true
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return false
}

// NewTracerProvider returns the tracer provider of the process: when
// TracingEnabled, an SDK provider exporting spans in batches over OTLP/HTTP,
// configured by the standard OTEL_EXPORTER_OTLP_* variables (the exporter
// reads them itself); otherwise a no-op provider. shutdown flushes and
// stops the exporter.
func NewTracerProvider(ctx context.Context, getenv func(string) string, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !TracingEnabled(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("toolgate"), semconv.ServiceVersion(version)))
	if err != nil {
		res = resource.Default()
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return sdk, sdk.Shutdown, nil
}
