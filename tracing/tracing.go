package tracing

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of turngate's spans.
const Name = "github.com/turngate/turngate"

// FromEnv returns the tracer provider the OTEL_* variables describe:
// OTLP over HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or OTEL_TRACES_EXPORTER is
// otlp), the exporter reading its other settings (headers, timeout,
// sampler via OTEL_TRACES_SAMPLER) itself; a no-op provider otherwise
// or with OTEL_TRACES_EXPORTER=none. shutdown flushes what is batched.
func FromEnv(ctx context.Context) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	exporter := os.Getenv("OTEL_TRACES_EXPORTER")
	on := exporter == "otlp" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if exporter == "none" || !on {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName())))
	if err != nil {
		return nil, nil, err
	}
	// A service name from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
	// wins over the default.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return sdk, sdk.Shutdown, nil
}

func serviceName() string {
	if n := os.Getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "turngate"
}

// Or is t, or a tracer that records nothing when t is nil.
func Or(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(Name)
	}
	return t
}

// Tracer is provider's turngate tracer; a nil provider traces nothing.
func Tracer(provider trace.TracerProvider) trace.Tracer {
	if provider == nil {
		return noop.NewTracerProvider().Tracer(Name)
	}
	return provider.Tracer(Name)
}

var propagator = propagation.TraceContext{}

// Parent is ctx's span context as a W3C traceparent, to store with a
// turn; empty when ctx carries no sampled span.
func Parent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// WithParent is ctx continuing the trace of a stored traceparent (a
// remote parent: the acceptance may have been another replica's).
func WithParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
