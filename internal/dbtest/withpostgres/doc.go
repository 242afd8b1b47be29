// Command withpostgres runs a command beside a private PostgreSQL for its
// tests: it starts one (internal/pgembed, not durable, in a temporary
// folder), points TURNGATE_TEST_DATABASE_URL at it, runs the command,
// stops the server and exits with the command's status.
//
//	go run ./internal/dbtest/withpostgres -- make test-race test-plain test-e2e
//
// make test runs its passes under it, so the test packages (each a
// process) share one server instead of each running initdb and starting
// its own: dbtest clones every test's database from a template there as
// it would on its own server. Interrupted, it passes the signal on and
// still stops the server; killed, the server dies with it (pgembed's
// parent-death signal).
//
// # What it must not import
//
// withpostgres imports internal/pgembed (the server it starts) and
// internal/dbtest (the variable it sets) only.
package main
