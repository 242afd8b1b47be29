// Package gqlclient is a small GraphQL client for tests and benchmarks:
// queries and mutations over HTTP POST, subscriptions over a real
// graphql-transport-ws WebSocket (github.com/coder/websocket) and over SSE.
//
// # What it must not import
//
// gqlclient speaks the wire protocols only: it imports no package of this
// module, so tests through it see exactly what a client sees.
package gqlclient
