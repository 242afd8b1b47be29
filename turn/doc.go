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
// A turn accepted into an idle lane (no active turn, nothing queued or
// running) by a replica whose runner has a free slot is claimed in the
// accepting transaction itself, under the room's row lock, with the same
// fenced updates: the run starts with no second commit. Any other turn waits
// for a runner's claim (woken by the journal hub, or the slow sweep).
//
// Every write a run makes afterwards carries its lease token: answer deltas
// (journal.Fence), heartbeats, and the terminal commit, whose UPDATE is
// `WHERE id = $turn AND lease_token = $mine AND state = 'running'`. A run
// whose token is stale writes nothing and gets lease.ErrFenced. The journal's
// partial unique index allows one turn_terminal per turn, whatever races.
//
// # Recovery
//
// A run whose process died keeps its claim until the lease expires by the
// database clock; nothing reclaims it earlier, so a dead-or-partitioned
// owner and its replacement never run at once. After expiry a freshly
// authorised client — a journal subscription watching the room, or an
// explicit resumeTurn — makes its replica recover the run at once; with no
// client, any runner's sweep salvages it one further lease period later.
// Recovery increments the lease token (fencing the old run) and starts a
// new attempt from the accepted input; past MaxAttempts it writes one
// failed terminal (recovery_exhausted) instead.
//
// # One run
//
// The runner admits one immutable runtime.Contract, and runtime.Run drives
// it through Callbacks implemented by callbackHost, which checks the run
// reference (turn, attempt, lease token, bundle digest) on every call.
// Model output is coalesced into answer_delta entries (a bounded window of
// time or tokens), so a reader resumes from its last position without losing
// text, and the database sees a bounded write rate per turn. A step's last
// delta is held back and commits with the terminal when the run completes
// next. Before an answer is published the author's room membership is
// re-checked under the room's lock; a removed author's answer is refused
// (failed, membership_revoked). While the run
// is active a heartbeat renews the lease; a renewal extends only an
// unexpired running claim. A failed renewal cancels the run and records a
// failed terminal (reason input_lease_lost), fenced by the same token.
//
// # Stopping
//
// Stopping a runner is not member intent. It stops claiming, lets runs in
// flight finish for a bounded drain, then detaches from the rest without
// recording a cancelled terminal and hands each turn back to its lane with
// a fenced release, so another runner takes it over at once.
package turn
