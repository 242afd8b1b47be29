// Package lease is the turns' state machine and the one place its SQL
// lives. A turn is queued, running (held by one run under a lease) or
// ended (completed, failed or cancelled); Store has one method per
// transition, each taking a params struct, each a fenced statement decided
// by the database:
//
//	queued  → running   Claim (the head of an idle lane), ClaimAccepted
//	                    (inside the accepting transaction)
//	running → running   Recover (a new lease token and attempt, only after
//	                    the old lease expired by the database clock), Renew
//	running → queued    Release (a stopping runner hands the turn back)
//	running → ended     Terminal (fenced by the lease token)
//	queued  → cancelled CancelQueued (the queued state is the fence)
//	queued, running → failed
//	                    Revoke (the author was removed from the room, in
//	                    the removal's transaction)
//
// Every ending settles the turn with Settle in the same transaction: the
// room's lane released, pending approvals expired, the carried-out
// command delivered and every other pending one rejected (a steer with a
// steer_rejected entry ahead of the terminal). At publication Terminal
// also re-checks the author's membership and, in a shared room, the
// audience's right to read what the answer cites (withholding it if
// not).
//
// Besides, the reads and fenced writes a run makes while it holds its
// lease: LaneHeads, Expired, ActiveLease, Checkpoint, ClaimSteers,
// DeliveredSteers, PendingCancel, AddEvidence, RecordModelCall.
//
// # Commands and approvals
//
// The records that move with a turn have their SQL here too, with the
// same params structs and the same interpretError:
//
//   - a member's commands: Steer and Cancel store one command per
//     idempotency key (ErrCommandReused for a key used otherwise,
//     ErrTurnEnded after the terminal); Cancel ends a queued turn in the
//     same transaction, and a running turn's run carries it out;
//   - approvals: RequestApproval (once per call of a turn, journaled and
//     fenced), CallApproval, ExpireApproval, ApprovalRoom and
//     DecideApproval (under the room's row lock, only while the decider is
//     a member: ErrNotMember, ErrNotPending), then ClaimExecution and
//     RecordExecution, so an approved effect runs at most once;
//   - model calls: RecordModelCall (fenced) and ModelCalls (replay).
//
// The callers (turn for members, callback for runs) authorise and map
// these errors to the API's codes.
//
// # Evidence
//
// A turn's evidence (turn_evidence) is every document its text may derive
// from: the documents selected as its input, every document a tool
// returned to it, and the evidence of every turn whose text it was given
// — its history, the room summary it started from, history search hits,
// the turns that made the files given as its input. AddEvidence records
// it, fenced, before anything derived from it is journaled or reaches the
// model: the input and history part at admission, a tool result's part
// before its tool_completed entry. It only grows. A viewer reads a turn
// only while they may read all of its evidence, and a model context built
// for a room holds a turn only while every current member may
// (authority.TurnReadableSQL, TurnAudienceReadableSQL). A room summary is
// kept with the audience version its history was built for and the
// evidence of what it summarised; a run starts from it only while both
// still hold.
//
// # The lane
//
// A room's turns start one at a time in position order, and every claim
// says so in SQL: a turn moves to running only if no earlier turn of its
// room is queued or running, and only together with the room's
// active_turn_id going from NULL to it; the partial unique index on
// running turns is the last word. Claim's statement may read a snapshot
// older than its wait for the turn's row, and that is safe: a snapshot
// that sees the turn sees every earlier one (their acceptances committed
// before its own took the room's row), and an ended turn never runs
// again. ClaimAccepted's turn is new, and an earlier acceptance may have
// committed while its own waited for the room's row, so its guard is a
// statement of its own, run after that lock is held; refused, it changes
// nothing and the acceptance commits the turn queued.
//
// # Fencing
//
// A run holds a Fence: its turn and lease token. Every write a run makes
// carries it — `WHERE id = $turn AND lease_token = $mine AND state =
// 'running'` — so a run whose token is stale writes nothing and gets
// ErrFenced. The journal's fenced append (journal.Append with a Fence) is
// the one read of the lease outside this package: it checks the same
// condition in its own statement.
//
// # Errors
//
// Storage errors stop here. A statement that finds no row to move, or
// that an index refuses (one running turn per room, one terminal per
// turn), means another actor moved the turn first: interpretError turns
// both into the transition's own error (ErrNotClaimable,
// ErrNotRecoverable, ErrFenced, ErrLeaseLost). Anything else is wrapped
// with the transition and the turn.
//
// # Lock order
//
// A transaction that locks a turn's row and its conversation's row takes
// the turn's first, then the conversation's: claim (turn, then the room's
// active_turn_id), recover and release (turn, then the journal head),
// terminal (turn, then the room's row lock for the audience check, the
// journal head and the release), checkpoint and steering (turn FOR SHARE,
// then the journal head; a checkpoint then the room's summary row), the
// fenced journal append (turn FOR SHARE, then the head, in one
// statement), and AddEvidence (turn FOR SHARE, then its evidence rows, in
// one statement). Acceptance is the one transaction
// that starts at the conversation's row, to take a position: after it, it
// may lock only the turn it inserts (ClaimAccepted, which also sets the
// room's active_turn_id on the row it already holds). Approval decisions
// and joins lock the conversation's row and no turn's; a removal locks the
// removed member's unfinished turns first (LockAuthorTurns), then the
// conversation's row, and ends those turns (Revoke).
//
// Acceptance keeps to that order with one exception it cannot avoid: its
// insert checks the idempotency key's unique index, and when the key's
// turn was committed by a concurrent acceptance after this one looked the
// key up (turn.Service.Submit looks it up in the statement that locks the
// room, and answers from the turn, waiting on nothing, when it is there),
// and a claim holds that turn's
// row waiting for the conversation's, the two deadlock. Postgres aborts
// one; a claim is retried by its runner's next pass, and Submit runs an
// aborted acceptance again (40P01 and 40001, up to three times), which
// then finds the turn. The client never sees it.
//
// # What it must not import
//
// lease sits under the turn API (turn), the runner (runner) and the
// callback host (callback): it imports ent, journal, pg, outcome,
// authority (the audience predicates its SQL embeds, membership before an
// answer lands) and metrics, never those packages nor graph or server.
package lease
