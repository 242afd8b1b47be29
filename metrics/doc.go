// Package metrics is turngate's Prometheus instrumentation: one registry
// per replica (App), the series the operator's dashboards read, and
// nil-safe methods the components call where the thing they count
// happens. Label sets are bounded: outcomes, reasons, routes, purposes,
// tools and transports — never a room, turn or member id.
//
// # What it must not import
//
// metrics is a leaf: it imports no package of this module, and outside the
// standard library only the Prometheus client. The components it counts
// for hold it, never the reverse.
package metrics
