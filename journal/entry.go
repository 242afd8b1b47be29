package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
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

// Querier is what Append and Read need: a *sql.DB, a *sql.Tx, an *ent.Client
// or an *ent.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const (
	takeSeq = `UPDATE conversations SET next_seq = next_seq + $2 WHERE id = $1 RETURNING next_seq`
	// The fence and the position are one statement. The turn row is read
	// FOR SHARE, so a re-claim that would fence this run either commits
	// first (and the check sees the new token) or waits for this append to
	// commit: a stale token takes nothing.
	takeSeqFenced = `UPDATE conversations SET next_seq = next_seq + $2
WHERE id = $1 AND EXISTS (
  SELECT 1 FROM turns WHERE id = $3 AND conversation_id = $1 AND state = 'running' AND lease_token = $4 FOR SHARE)
RETURNING next_seq`
)

// Append writes drafts at the next positions of conversation, in order, and
// returns them as stored. Call it inside the transaction that makes the
// change the entries record; the caller commits and then calls
// Hub.Committed. With a non-nil fence the append lands only while the
// fence's run owns the turn, otherwise it returns ErrFenced.
func Append(ctx context.Context, q Querier, conversation uuid.UUID, fence *Fence, drafts ...Draft) ([]Entry, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	var rows *sql.Rows
	var err error
	if fence != nil {
		rows, err = q.QueryContext(ctx, takeSeqFenced, conversation, len(drafts), fence.TurnID, fence.LeaseToken)
	} else {
		rows, err = q.QueryContext(ctx, takeSeq, conversation, len(drafts))
	}
	if err != nil {
		return nil, fmt.Errorf("journal append: take position: %w", err)
	}
	var head int64
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&head); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		if fence != nil {
			return nil, ErrFenced
		}
		return nil, ErrNoConversation
	}

	return insert(ctx, q, conversation, head-int64(len(drafts))+1, drafts...)
}

// insert writes drafts at positions first, first+1, ... of conversation.
// The caller has taken those positions from the room's next_seq in the
// same transaction.
func insert(ctx context.Context, q Querier, conversation uuid.UUID, first int64, drafts ...Draft) ([]Entry, error) {
	payloads := make([][]byte, len(drafts))
	for i, d := range drafts {
		b, err := marshalPayload(d.Payload)
		if err != nil {
			return nil, fmt.Errorf("journal insert %s: %w", d.Kind, err)
		}
		payloads[i] = b
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO journal_entries (conversation_id, seq, kind, turn_id, attempt, actor_id, payload) VALUES `)
	args := make([]any, 0, 1+6*len(drafts))
	args = append(args, conversation)
	for i, d := range drafts {
		if i > 0 {
			sb.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&sb, "($1, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6)
		args = append(args, first+int64(i), string(d.Kind), d.TurnID, d.Attempt, d.ActorID, string(payloads[i]))
	}
	sb.WriteString(` RETURNING id, created_at`)
	rows, err := q.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("journal append: insert: %w", err)
	}
	defer rows.Close()
	out := make([]Entry, 0, len(drafts))
	for i := 0; rows.Next(); i++ {
		e := Entry{
			ConversationID: conversation,
			Seq:            first + int64(i),
			Kind:           drafts[i].Kind,
			TurnID:         drafts[i].TurnID,
			Attempt:        drafts[i].Attempt,
			ActorID:        drafts[i].ActorID,
			Payload:        payloads[i],
		}
		if err := rows.Scan(&e.ID, &e.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("journal append: insert: %w", err)
	}
	return out, nil
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
func Read(ctx context.Context, q Querier, conversation uuid.UUID, after int64, limit int) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, selectEntries+` WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		conversation, after, limit)
	if err != nil {
		return nil, fmt.Errorf("journal read %s after %d: %w", conversation, after, err)
	}
	return scanEntries(rows)
}

// ReadTurn returns up to limit entries of one turn with seq > after and a
// kind among kinds (all kinds when empty), in position order.
func ReadTurn(ctx context.Context, q Querier, turn uuid.UUID, after int64, limit int, kinds ...Kind) ([]Entry, error) {
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
func Head(ctx context.Context, q Querier, conversation uuid.UUID) (int64, error) {
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
