// Package turn is the API side of a turn: durable acceptance (Submit) and
// the member commands on it (Steer, Cancel, DecideApproval). It decides
// who may do what, stores the intent durably, and leaves running the turn
// to a runner.
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
// A turn accepted into an idle lane (no active turn, nothing queued or
// running) by a replica whose runner has a free slot is claimed in the
// accepting transaction itself, under the room's row lock, through the
// narrow Starter interface (lease.Store.ClaimAccepted): the run starts with
// no second commit. Any other turn waits for a runner's claim.
//
// The lane is read only after the room's row lock is held: by the insert
// (acceptTurn), not by the statement that takes the lock, whose snapshot
// predates its wait and misses an acceptance committed meanwhile by a
// replica that left its turn queued. The claim's own statement then checks
// the lane again (first in, first out), so the read is only a hint; a
// claim refused there leaves the turn accepted and queued, gives the run
// slot back, and the runners' claim loop takes the lane in order.
//
// # Commands
//
// Steer and Cancel store a durable command naming the exact turn, its
// room and the actor; any replica accepts it, the hub wakes the run that
// owns the turn, and only that run — fenced by its lease — carries it out.
// A cancel of a turn that has not started ends it at once
// (lease.Store.Cancel). A command still pending when the turn ends
// is rejected with the terminal. DecideApproval records a member's
// decision on an effect a run proposed. turn authorises; the commands' and
// approvals' SQL is lease's.
//
// Acceptance is the one transaction that starts at the conversation's row
// (to take a position); the lock order every other transaction follows is
// in lease's package documentation.
//
// # What it must not import
//
// turn imports lease, journal, authority, resource access, ent, pg,
// errcode, gateway (the stored request and response a model call is read
// as), metrics and tracing; never runner, callback, graph or server. The
// runner reaches it only as a Starter.
package turn
