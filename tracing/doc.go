// Package tracing is turngate's OpenTelemetry setup: a tracer provider
// from the standard OTEL_* environment variables (OTLP over HTTP; off
// when none is set), and the W3C trace context a turn carries from its
// acceptance to every run that works on it, on whichever replica.
//
// # What it must not import
//
// tracing is a leaf: it imports no package of this module, and outside the
// standard library only OpenTelemetry.
package tracing
