// Package outcome names how a turn ends: its terminal reasons, what it
// spent, and the notice that stands in for an answer withheld from a
// room's audience. It is a leaf: the turn state machine (lease) writes
// these values, and the API (graph), the viewer's projection (feed) and
// the clients' conformance read them, without importing the state
// machine for a constant.
//
// # What it must not import
//
// outcome imports nothing of turngate's: every other package may import
// it.
package outcome
