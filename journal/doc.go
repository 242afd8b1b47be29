// Package journal owns the conversation journal: appending entries at
// durable positions, reading them back from a position, and waking the
// readers that follow a room.
//
// # Positions
//
// Every entry of a conversation has a position (seq), dense from 1 and never
// reused. An append takes its positions by
//
//	UPDATE conversations SET next_seq = next_seq + n WHERE id = $room RETURNING next_seq
//
// inside the appending transaction, written once as [TakePositions]: the
// journal's own appends, a submission's turn_accepted (turn) and a run's
// steer deliveries (lease) all embed it. The row lock that UPDATE takes is held
// until commit, so two appends to one room commit in position order and a
// reader that has seen position p will never later see a smaller position
// appear: there is no gap that closes afterwards. The unique index on
// (conversation_id, seq) is the last word if anything ever tried otherwise.
//
// # Fencing
//
// Writes made on behalf of a run carry a Fence (turn id and lease token).
// The fence is checked by the same UPDATE that takes the position, so a run
// that lost its lease can append nothing: the statement finds no row and
// Append returns ErrFenced with the transaction unchanged.
//
// # Waking readers
//
// Readers never receive entries from memory; they always read them from the
// database after the last position they hold, so a reader that falls behind
// or reconnects loses nothing and sees nothing twice. The Hub only tells
// them when to look:
//
//   - the writing replica calls Hub.Committed after commit and wakes its own
//     readers at once;
//   - other replicas learn of new heads through one LISTEN connection per
//     replica. NOTIFY is sent after commit, outside the append transaction,
//     debounced per replica, with room ids and head positions only, never
//     content: a NOTIFY inside the transaction takes a database-wide lock at
//     commit and costs several times the commit rate.
//   - notifications are hints. After a listener reconnect, and on a slow
//     periodic tick, every reader re-reads, so a lost NOTIFY delays a stream
//     but never loses an entry.
//
// # What it must not import
//
// journal imports pg and internal/startstop only: the turn's state machine
// (lease), the turn API (turn), the runner, the rooms (room, feed), graph and
// server all append to or read it, and it reaches none of them.
package journal
