package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/pg"
)

// Kind names what an entry records.
type Kind string

const (
	KindTurnAccepted      Kind = "turn_accepted"
	KindTurnStarted       Kind = "turn_started"
	KindAnswerDelta       Kind = "answer_delta"
	KindToolRequested     Kind = "tool_requested"
	KindToolCompleted     Kind = "tool_completed"
	KindApprovalRequested Kind = "approval_requested"
	KindApprovalDecided   Kind = "approval_decided"
	KindSteerDelivered    Kind = "steer_delivered"
	KindSteerRejected     Kind = "steer_rejected"
	KindCheckpoint        Kind = "checkpoint"
	KindCompaction        Kind = "compaction"
	KindTurnAnswer        Kind = "turn_answer"
	KindTurnTerminal      Kind = "turn_terminal"
	KindMemberJoined      Kind = "member_joined"
	KindMemberLeft        Kind = "member_left"
)

// Entry is one journal entry as stored.
type Entry struct {
	ID             int64
	ConversationID uuid.UUID
	Seq            int64
	Kind           Kind
	TurnID         uuid.NullUUID
	Attempt        int
	ActorID        uuid.NullUUID
	Payload        json.RawMessage
	CreatedAt      time.Time
	// View is what the read function of a follow (FollowShared) computed
	// for the batch the entry was read in — for example which of the
	// room's members may read what it derives from — kept with the entry
	// in the room's shared tail. The journal never sets or reads it.
	View any
}

// Draft is an entry to append; its position is assigned by Append.
type Draft struct {
	Kind    Kind
	TurnID  uuid.NullUUID
	Attempt int
	ActorID uuid.NullUUID
	// Payload is marshalled to JSON; a json.RawMessage is stored as is.
	Payload any
}

// Fence restricts a write to the run that holds a turn's lease: the turn
// must be running with exactly this lease token.
type Fence struct {
	TurnID     uuid.UUID
	LeaseToken int64
}

// ErrFenced reports a write refused because the run's lease token is no
// longer the turn's current one (or the turn is no longer running). Nothing
// was written.
var ErrFenced = errors.New("lease token fenced: the run no longer owns this turn")

// ErrNoConversation reports an append to a conversation that does not exist.
var ErrNoConversation = errors.New("conversation does not exist")

// The position and the entries are one statement: the room's counter
// moves by the number of entries and the entries take the positions it
// moved over, so an append is atomic even outside a transaction. Fenced,
// the turn row is read FOR SHARE in the same statement, so a re-claim that
// would fence this run either commits first (and the check sees the new
// token) or waits for this append to commit: a stale token takes nothing.
var (
	appendHead       = "WITH head AS (" + TakePositions("$1", "$2", "") + ")\n"
	appendHeadFenced = "WITH head AS (" + TakePositions("$1", "$2", `EXISTS (
    SELECT 1 FROM turns WHERE id = $3 AND conversation_id = $1 AND state = 'running' AND lease_token = $4 FOR SHARE)`) + ")\n"
)

// TakePositions is the one statement that takes journal positions: it
// moves room's counter by n under the room's row lock (held to commit) and
// returns base, the position before the first one taken — the positions
// are base+1 … base+n. room and n are SQL expressions; cond, when not
// empty, is a further condition, and nothing is taken when it is false;
// returning names more columns of the room to return. Every writer of the
// journal takes its positions through it, inside the statement that
// inserts the entries or in the transaction that does.
func TakePositions(room, n, cond string, returning ...string) string {
	where := "id = " + room
	if cond != "" {
		where += " AND " + cond
	}
	cols := "next_seq - " + n + " AS base"
	for _, c := range returning {
		cols += ", " + c
	}
	return "UPDATE conversations SET next_seq = next_seq + " + n + " WHERE " + where + " RETURNING " + cols
}

const (
	appendInsert = `INSERT INTO journal_entries (conversation_id, seq, kind, turn_id, attempt, actor_id, payload)
SELECT $1, head.base + v.i, v.kind, v.turn_id, v.attempt, v.actor_id, v.payload FROM head, (VALUES `
	appendTail = `) AS v(i, kind, turn_id, attempt, actor_id, payload)
RETURNING id, seq, created_at`
)

// appendSQL is the append statement for n drafts, fenced or not.
var appendSQL sync.Map // [2]int{n, fenced} → string

func appendStatement(n int, fenced bool) (string, int) {
	first := 3 // $1 room, $2 count, then the drafts
	if fenced {
		first = 5 // $3 turn, $4 lease token
	}
	key := [2]int{n, first}
	if q, ok := appendSQL.Load(key); ok {
		return q.(string), first
	}
	var sb strings.Builder
	if fenced {
		sb.WriteString(appendHeadFenced)
	} else {
		sb.WriteString(appendHead)
	}
	sb.WriteString(appendInsert)
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		p := first + 5*i
		fmt.Fprintf(&sb, "(%d::bigint, $%d::text, $%d::uuid, $%d::bigint, $%d::uuid, $%d::jsonb)", i+1, p, p+1, p+2, p+3, p+4)
	}
	sb.WriteString(appendTail)
	q := sb.String()
	appendSQL.Store(key, q)
	return q, first
}

// Append writes drafts at the next positions of conversation, in order, and
// returns them as stored, in one statement. Call it inside the transaction
// that makes the change the entries record — or on its own, for entries
// that record nothing else; the caller commits and then calls
// Hub.Committed. With a non-nil fence the append lands only while the
// fence's run owns the turn, otherwise it returns ErrFenced.
func Append(ctx context.Context, q pg.Querier, conversation uuid.UUID, fence *Fence, drafts ...Draft) ([]Entry, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	query, _ := appendStatement(len(drafts), fence != nil)
	args := make([]any, 0, 4+5*len(drafts))
	args = append(args, conversation, len(drafts))
	if fence != nil {
		args = append(args, fence.TurnID, fence.LeaseToken)
	}
	payloads := make([][]byte, len(drafts))
	for i, d := range drafts {
		b, err := marshalPayload(d.Payload)
		if err != nil {
			return nil, fmt.Errorf("journal append %s: %w", d.Kind, err)
		}
		payloads[i] = b
		args = append(args, string(d.Kind), d.TurnID, d.Attempt, d.ActorID, string(b))
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("journal append: %w", err)
	}
	defer rows.Close()
	out := make([]Entry, len(drafts))
	found := 0
	var base int64
	for rows.Next() {
		var id, seq int64
		var created time.Time
		if err := rows.Scan(&id, &seq, &created); err != nil {
			return nil, err
		}
		if found == 0 {
			base = seq
		}
		base = min(base, seq)
		out[found] = Entry{ID: id, Seq: seq, CreatedAt: created}
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("journal append: %w", err)
	}
	if found == 0 {
		if fence != nil {
			return nil, ErrFenced
		}
		return nil, ErrNoConversation
	}
	if found != len(drafts) {
		return nil, fmt.Errorf("journal append: stored %d of %d entries", found, len(drafts))
	}
	// RETURNING order is not promised: place each entry by its position.
	stored := make([]Entry, len(drafts))
	for _, e := range out {
		i := int(e.Seq - base)
		d := drafts[i]
		stored[i] = Entry{ID: e.ID, ConversationID: conversation, Seq: e.Seq, Kind: d.Kind, TurnID: d.TurnID,
			Attempt: d.Attempt, ActorID: d.ActorID, Payload: payloads[i], CreatedAt: e.CreatedAt}
	}
	return stored, nil
}

func marshalPayload(p any) ([]byte, error) {
	switch v := p.(type) {
	case nil:
		return []byte(`{}`), nil
	case json.RawMessage:
		if len(v) == 0 {
			return []byte(`{}`), nil
		}
		return v, nil
	default:
		return json.Marshal(v)
	}
}

const selectEntries = `SELECT id, conversation_id, seq, kind, turn_id, attempt, actor_id, payload, created_at
FROM journal_entries`

// Read returns up to limit entries of conversation with seq > after, in
// position order.
func Read(ctx context.Context, q pg.Querier, conversation uuid.UUID, after int64, limit int) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, selectEntries+` WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		conversation, after, limit)
	if err != nil {
		return nil, fmt.Errorf("journal read %s after %d: %w", conversation, after, err)
	}
	return scanEntries(rows)
}

// ReadTurn returns up to limit entries of one turn with seq > after and a
// kind among kinds (all kinds when empty), in position order.
func ReadTurn(ctx context.Context, q pg.Querier, turn uuid.UUID, after int64, limit int, kinds ...Kind) ([]Entry, error) {
	ks := make([]string, len(kinds))
	for i, k := range kinds {
		ks[i] = string(k)
	}
	rows, err := q.QueryContext(ctx, selectEntries+` WHERE turn_id = $1 AND seq > $2
  AND (cardinality($4::text[]) = 0 OR kind = ANY($4::text[])) ORDER BY seq LIMIT $3`,
		turn, after, limit, pq.Array(ks))
	if err != nil {
		return nil, fmt.Errorf("journal read turn %s after %d: %w", turn, after, err)
	}
	return scanEntries(rows)
}

func scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var kind string
		var payload []byte
		if err := rows.Scan(&e.ID, &e.ConversationID, &e.Seq, &kind, &e.TurnID, &e.Attempt, &e.ActorID, &payload, &e.CreatedAt); err != nil {
			return nil, err
		}
		e.Kind = Kind(kind)
		e.Payload = payload
		out = append(out, e)
	}
	return out, rows.Err()
}

// Head returns the conversation's last assigned position.
func Head(ctx context.Context, q pg.Querier, conversation uuid.UUID) (int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT next_seq FROM conversations WHERE id = $1`, conversation)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, ErrNoConversation
	}
	var head int64
	if err := rows.Scan(&head); err != nil {
		return 0, err
	}
	return head, rows.Err()
}
