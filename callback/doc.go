// Package callback is the backend side of the runtime contract: Host
// implements runtime.Callbacks for one run, and is the only way the
// untrusted runtime reaches anything.
//
// # The run reference
//
// Every call presents the run reference — turn, attempt, lease token and
// the digest of the turn's authority bundle — and anything but the run's
// exact reference is rejected (ErrRunMismatch), never reconciled. Every
// write a callback makes is fenced by the lease token besides
// (lease.Store's run writes, journal.Append with a Fence).
//
// # What a run may ask
//
// Model runs one step through the gateway; answer text streams into the
// journal as answer_delta entries, coalesced into a bounded window of time
// or tokens and redacted whole words at a time, so a reader resumes from
// its last position without losing text and the database sees a bounded
// write rate per turn. A step's last delta is held back and commits with
// the terminal when the run completes next. Tool runs one tool as the
// turn's member with the permission they hold at that moment, journaled
// before and after, its result redacted and bounded; an effectful tool
// waits at the approval gate and runs at most once per approval. What a
// tool result derives from (tools.Result.Documents, and the documents
// its citations name) is recorded as the turn's evidence, fenced, before
// the result is journaled or the model reads it
// (lease.Store.AddEvidence). A room summary a compaction of the history
// makes is kept for the audience the history was built for, with the
// evidence of what it summarised.
// Checkpoint, Steering and Complete are the run's fenced progress, its
// member commands and its one completed terminal (citations checked,
// answer redacted, authorship re-checked under the room's lock).
//
// # What it must not import
//
// callback imports lease, outcome, journal, gateway, guard, tools,
// resource, authority, runtime, ent, pg, metrics and tracing; never turn,
// runner, graph or server.
package callback
