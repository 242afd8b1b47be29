//go:build race

package e2etest

// raceEnabled: the tests run under -race (this file builds with the race
// tag); the binary is race-built too.
const raceEnabled = true
