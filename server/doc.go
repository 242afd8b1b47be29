// Package server is turngate's server as a library: its configuration (a
// table of settings read from the environment, config.go), an App that
// wires the services (app.go) — the database, the journal hub, the
// runner, the resolvers — and its HTTP surface (http.go: GraphQL over
// HTTP, WebSocket and SSE, GraphiQL, the web app, artifact downloads; the
// edge checks of edge.go and the graphql-transport-ws rules of ws.go),
// and the process's lifecycle: start, orderly drain on SIGTERM, and the
// order things stop in. cmd/turngate is its command; the end-to-end tests
// start the same wiring.
//
// With no DATABASE_URL it starts a private PostgreSQL in its data folder
// (TURNGATE_DATA, default .turngate), through internal/pgembed.
//
// # What it must not import
//
// Only cmd/turngate and tests (through internal/servertest, their
// harness) import server. It may import every package
// but cmd; it writes no SQL on the domain's tables (creating the database
// it is pointed at is its own).
package server
