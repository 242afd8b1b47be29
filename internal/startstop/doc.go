// Package startstop is the one lifecycle every long-lived service here
// shares (the journal hub, the runner): Start once, Stop blocks until the
// service's goroutines have exited, Stop is safe to call twice and before
// Start, and a service stopped before it started never starts.
//
// A service embeds BaseStartStop, calls StartInit at the top of its Start
// and, when it may start, does its synchronous set-up and launches its
// goroutine, which calls the returned stopped func when it exits. Stop
// cancels the context StartInit returned and waits for stopped.
//
// # What it must not import
//
// It imports the standard library only.
package startstop
