// Package servertest starts turngate's server in the test's own process,
// wired exactly as `turngate serve` wires it, on a loopback port and a
// database of its own, and hands out GraphQL clients carrying dev
// envelopes. The server's API tests, the command's tests and the
// end-to-end tier share it.
//
// A package that uses it runs its tests under internal/dbtest's TestMain
// (dbtest.Main with migrations.Apply): each harness takes a database
// cloned from the migrated template.
//
// # What it must not import
//
// servertest starts the server (server) under a test's database
// (internal/dbtest) and talks to it with internal/gqlclient; no production
// package imports it, and of the test kits only internal/e2etest does. It
// never reaches the command (cmd/turngate).
package servertest
