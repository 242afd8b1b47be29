// Package runner claims the heads of room lanes and runs them: the claim
// loop, heartbeats, recovery and salvage of dead runs, and the drain on
// stop. Its state transitions are lease.Store's; the backend side of a run
// is callback.Host's.
//
// # Lanes and leases
//
// A room has one first-in-first-out lane and at most one running turn. A
// runner claims the head of a lane (lease.Store.Claim) when the journal hub
// wakes it or on its slow sweep; a turn accepted into an idle lane is
// claimed at acceptance instead (ClaimAccepted, the turn.Starter the API
// side holds); when that claim finds an earlier turn in the lane it is
// refused, its slot is given back, and the loop takes the lane in order.
// While a run is active a heartbeat renews its lease; a
// renewal extends only an unexpired running claim. A failed renewal
// cancels the run and records a failed terminal (input_lease_lost), fenced
// by the same token.
//
// # One run
//
// Admit builds one immutable runtime.Contract from the turn's pinned
// authority bundle (refused if it no longer hashes to the turn's digest)
// and agent version, and runtime.Run drives it through a callback.Host.
// The history it gives the run holds only what every current member of
// the room may read now: the finished turns whose evidence they may all
// read, and the room's summary only when it was built for the room's
// audience version now and they may all read its evidence. What the
// turn is given — that history, the documents and files selected as its
// input — is recorded as its evidence, fenced, before the run starts.
// The run's outcome is decided here — completed by the host's own
// terminal, cancelled by a member's durable command, failed with a reason
// — and lands only through lease.Store.Terminal, fenced: a run that lost
// its lease writes nothing.
//
// # Recovery
//
// A run whose process died keeps its claim until the lease expires by the
// database clock; nothing reclaims it earlier, so a dead-or-partitioned
// owner and its replacement never run at once. After expiry a freshly
// authorised client — a journal subscription watching the room (Watch), or
// an explicit resumeTurn (Resume) — makes its replica recover the run at
// once; with no client, any runner's sweep salvages it one further lease
// period later. Recovery starts a new attempt from the accepted input and
// the last checkpoint; past MaxAttempts it writes one failed terminal
// (recovery_exhausted) instead.
//
// # Stopping
//
// Stopping a runner is not member intent. It stops claiming, lets runs in
// flight finish for a bounded drain, then detaches from the rest without
// recording a cancelled terminal and hands each turn back to its lane with
// a fenced release, so another runner takes it over at once. Start and
// Stop are internal/startstop's lifecycle.
//
// # What it must not import
//
// runner imports lease, outcome, callback, journal, gateway, tools, guard,
// runtime, authority, resource, ent, metrics, tracing and
// internal/startstop; never
// turn, graph or server.
package runner
