// Package e2etest is the kit of the end-to-end tier: real turngate
// processes — one binary built per test binary (race-built when the tests
// run under -race, so the race detector watches the server processes too),
// or the one TURNGATE_E2E_BINARY names — started against a shared
// database, killed with SIGKILL, watched for data races, and their memory.
//
// # What it must not import
//
// e2etest is for the end-to-end tier's tests alone: no package imports it
// from a non-test file. It never reaches the command (cmd/turngate): it
// runs the built binary.
package e2etest
