// Package turn owns the life of a turn: durable acceptance, the room lane,
// the lease that fences a run, and the one terminal outcome.
//
// # Acceptance
//
// Submit inserts the turn and appends its turn_accepted entry in one
// transaction, and returns only after commit: once a caller has a turn id,
// the input is durable. The turn is unique per (conversation, author,
// idempotency key); a retry, however concurrent, converges on the same turn
// (the unique index decides, not a Go check), and the same key with other
// text is a CONFLICT. The turn's position is the journal position of its
// turn_accepted entry, which is also its place in the room's lane.
//
// # Lanes and leases
//
// A room has one first-in-first-out lane and at most one running turn. A
// runner claims the head of a lane with two fenced updates in one
// transaction: the turn goes queued → running only if no earlier turn of the
// room is still queued, its lease_token is incremented and its lease expiry
// set by the database clock; and the room's active_turn_id is set only if it
// was empty. A partial unique index (one running turn per room) backs both.
//
// Every write a run makes afterwards carries its lease token: answer deltas
// (journal.Fence), heartbeats, and the terminal commit, whose UPDATE is
// `WHERE id = $turn AND lease_token = $mine AND state = 'running'`. A run
// whose token is stale writes nothing and gets ErrFenced. The journal's
// partial unique index allows one turn_terminal per turn, whatever races.
//
// # One run
//
// The runner admits one immutable runtime.Contract, and runtime.Run drives
// it through Callbacks implemented by callbackHost, which checks the run
// reference (turn, attempt, lease token, bundle digest) on every call.
// Model output is coalesced into answer_delta entries (a bounded window of
// time or tokens), so a reader resumes from its last position without losing
// text, and the database sees a bounded write rate per turn. While the run
// is active a heartbeat renews the lease; a renewal extends only an
// unexpired running claim. A failed renewal cancels the run and records a
// failed terminal (reason input_lease_lost), fenced by the same token.
//
// # Stopping
//
// Stopping a runner is not member intent: it detaches from its runs without
// recording a cancelled terminal, and hands each run's turn back to the
// queue with a fenced release, so another runner takes it over.
package turn
