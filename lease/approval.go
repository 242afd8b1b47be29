package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

// An approval is a proposed external effect of a turn waiting for a
// member's decision: pending, then approved, rejected or expired, and an
// approved one executed at most once, fenced by the lease of the run that
// executes it. Its SQL lives here with the turn's, so the approval and
// the turn move under one lock order (the room's row, then the turn's).

// ErrNoApproval reports an approval id that names no approval.
var ErrNoApproval = errors.New("no such approval")

// ErrNotPending reports a decision on an approval that is no longer
// pending (decided, or expired by the database clock).
var ErrNotPending = errors.New("the approval is no longer pending")

// ErrNotMember reports a decision by an actor who is not a member of the
// approval's room when the decision would land.
var ErrNotMember = errors.New("the actor is not a member of the room")

// Approval is an approval as stored.
type Approval struct {
	ID     uuid.UUID
	TurnID uuid.UUID
	Tool   string
	// Arguments are the call's arguments as the approval stores them:
	// redacted, shown to the approver, and what the execution sends.
	Arguments string
	State     string
	DecidedBy uuid.UUID
	ExpiresAt time.Time
	Executed  bool
	// Result is the executed call's result ("null" before).
	Result json.RawMessage
}

const approvalColumns = `id, turn_id, tool, arguments::text, state, decided_by, expires_at, executed_at IS NOT NULL, COALESCE(result, 'null')`

// readApproval reads one approval by where (over $1, $2...) into a.
func readApproval(ctx context.Context, q pg.Querier, where string, args ...any) (Approval, error) {
	var a Approval
	var decidedBy uuid.NullUUID
	err := pg.QueryRow(ctx, q, `SELECT `+approvalColumns+` FROM approvals WHERE `+where, args,
		&a.ID, &a.TurnID, &a.Tool, &a.Arguments, &a.State, &decidedBy, &a.ExpiresAt, &a.Executed, &a.Result)
	a.DecidedBy = decidedBy.UUID
	return a, err
}

// Approval reads an approval by its id.
func (s *Store) Approval(ctx context.Context, id uuid.UUID) (Approval, error) {
	a, err := readApproval(ctx, s.client, `id = $1`, id)
	return a, interpretError(err, ErrNoApproval, "approval", id)
}

// ApprovalParams names one call of a claimed turn.
type ApprovalParams struct {
	Claim *Claimed
	// CallID keys the call within its turn, the same for every attempt
	// that proposes it again.
	CallID string
}

// CallApproval reads the approval of one call of the claimed turn.
func (s *Store) CallApproval(ctx context.Context, p ApprovalParams) (Approval, error) {
	a, err := readApproval(ctx, s.client, `turn_id = $1 AND call_id = $2`, p.Claim.Turn.ID, p.CallID)
	return a, interpretError(err, ErrNoApproval, "approval of", p.Claim.Turn.ID)
}

// RequestApprovalParams is a call of a claimed turn that needs a member's
// decision.
type RequestApprovalParams struct {
	ApprovalParams
	Tool string
	// Arguments are stored, shown to the approver and sent by the
	// execution: the caller has redacted them.
	Arguments string
	// Shown is what approval_requested journals of them (bounded).
	Shown string
	// TTL is how long the approval waits for a decision.
	TTL time.Duration
}

const insertApproval = `INSERT INTO approvals (id, turn_id, conversation_id, call_id, tool, arguments, state, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'pending', now() + make_interval(secs => $7))
ON CONFLICT (conversation_id, turn_id, call_id) DO NOTHING`

// RequestApproval stores the approval of a call, or finds the one an
// earlier attempt of the turn stored, and journals approval_requested
// when it is new, fenced by the claim's lease: a run that no longer owns
// the turn journals nothing and gets ErrFenced.
func (s *Store) RequestApproval(ctx context.Context, p RequestApprovalParams) (Approval, error) {
	c := p.Claim
	var a Approval
	var head int64
	err := s.inTx(ctx, "request approval of", c.Turn.ID, func(tx *ent.Tx) error {
		res, err := tx.ExecContext(ctx, insertApproval, uuid.New(), c.Turn.ID, c.Turn.ConversationID, p.CallID, p.Tool,
			p.Arguments, p.TTL.Seconds())
		if err != nil {
			return fmt.Errorf("request approval of %s: %w", c.Turn.ID, err)
		}
		a, err = readApproval(ctx, tx, `turn_id = $1 AND call_id = $2`, c.Turn.ID, p.CallID)
		if err != nil {
			return fmt.Errorf("request approval of %s: %w", c.Turn.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, journal.Draft{
			Kind: journal.KindApprovalRequested, TurnID: uuid.NullUUID{UUID: c.Turn.ID, Valid: true}, Attempt: c.Turn.Attempt,
			Payload: journal.ApprovalRequestedPayload{ApprovalID: a.ID, Tool: p.Tool, Arguments: p.Shown, ExpiresAt: a.ExpiresAt.UTC()},
		})
		if err != nil {
			return interpretError(err, ErrFenced, "request approval of", c.Turn.ID)
		}
		head = entries[0].Seq
		return nil
	})
	if err == nil && head > 0 {
		s.hub.Committed(c.Turn.ConversationID, head)
	}
	return a, err
}

// ExpireApprovalParams names a pending approval of a claimed turn whose
// time ran out.
type ExpireApprovalParams struct {
	Claim *Claimed
	ID    uuid.UUID
}

// ExpireApproval ends a pending approval whose time ran out by the
// database clock, journaled (approval_decided, expired) and fenced by the
// claim's lease. One decided meanwhile, or not yet due, is left as it is.
func (s *Store) ExpireApproval(ctx context.Context, p ExpireApprovalParams) error {
	c := p.Claim
	var head int64
	err := s.inTx(ctx, "expire approval of", c.Turn.ID, func(tx *ent.Tx) error {
		err := exec(ctx, tx, errNone, "expire approval of", c.Turn.ID,
			`UPDATE approvals SET state = 'expired', decided_at = now() WHERE id = $1 AND state = 'pending' AND expires_at <= now()`, p.ID)
		if errors.Is(err, errNone) {
			return nil
		}
		if err != nil {
			return err
		}
		entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, journal.Draft{
			Kind: journal.KindApprovalDecided, TurnID: uuid.NullUUID{UUID: c.Turn.ID, Valid: true}, Attempt: c.Turn.Attempt,
			Payload: journal.ApprovalDecidedPayload{ApprovalID: p.ID, Decision: "expired"},
		})
		if err != nil {
			return interpretError(err, ErrFenced, "expire approval of", c.Turn.ID)
		}
		head = entries[0].Seq
		return nil
	})
	if err == nil && head > 0 {
		s.hub.Committed(c.Turn.ConversationID, head)
	}
	return err
}

// ApprovalRoom is what a decision on an approval is authorised against:
// its turn, the turn's author, and the room as a viewer sees it.
type ApprovalRoom struct {
	Turn, Room, Author, Owner uuid.UUID
	Kind                      string
	// Member: the viewer is a member of the room now.
	Member bool
}

// ApprovalRoom reads the turn and room of an approval, and whether viewer
// is a member of that room.
func (s *Store) ApprovalRoom(ctx context.Context, id, viewer uuid.UUID) (ApprovalRoom, error) {
	var r ApprovalRoom
	err := pg.QueryRow(ctx, s.client, `SELECT a.turn_id, a.conversation_id, t.author_id, c.owner_id, c.kind, `+
		authority.MemberSQL("a.conversation_id", "$2")+`
FROM approvals a JOIN turns t ON t.id = a.turn_id JOIN conversations c ON c.id = a.conversation_id WHERE a.id = $1`,
		[]any{id, viewer}, &r.Turn, &r.Room, &r.Author, &r.Owner, &r.Kind, &r.Member)
	return r, interpretError(err, ErrNoApproval, "approval", id)
}

// DecideApprovalParams is a member's decision on a pending approval. The
// caller has authorised the actor against ApprovalRoom.
type DecideApprovalParams struct {
	ID, Room, Turn, Actor uuid.UUID
	// Decision is approved or rejected.
	Decision string
}

var decideApproval = `UPDATE approvals SET state = $2, decided_by = $3, decided_at = now()
WHERE id = $1 AND state = 'pending' AND expires_at > now()
  AND ` + authority.MemberSQL("$4", "$3") + `
RETURNING state`

// DecideApproval records a decision on a pending, unexpired approval and
// journals it (approval_decided). The room's row lock (shared) orders it
// against membership changes, which take that lock too, and the decision
// lands only while the actor is still a member: ErrNotMember otherwise.
// An approval no longer pending is ErrNotPending, and nothing changes.
func (s *Store) DecideApproval(ctx context.Context, p DecideApprovalParams) error {
	var head int64
	err := s.inTx(ctx, "decide approval of", p.Turn, func(tx *ent.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR SHARE`, p.Room); err != nil {
			return fmt.Errorf("decide approval %s: %w", p.ID, err)
		}
		var decided string
		err := queryRow(ctx, tx, ErrNotPending, "decide approval of", p.Turn, decideApproval,
			[]any{p.ID, p.Decision, p.Actor, p.Room}, &decided)
		if errors.Is(err, ErrNotPending) {
			member, err := authority.IsMember(ctx, tx, p.Room, p.Actor)
			if err != nil {
				return fmt.Errorf("decide approval %s: %w", p.ID, err)
			}
			if !member {
				return ErrNotMember
			}
			return ErrNotPending
		}
		if err != nil {
			return err
		}
		var attempt int
		if err := queryRow(ctx, tx, errNone, "decide approval of", p.Turn, `SELECT attempt FROM turns WHERE id = $1`, []any{p.Turn}, &attempt); err != nil {
			return err
		}
		entries, err := journal.Append(ctx, tx, p.Room, nil, journal.Draft{
			Kind: journal.KindApprovalDecided, TurnID: uuid.NullUUID{UUID: p.Turn, Valid: true}, Attempt: attempt,
			ActorID: uuid.NullUUID{UUID: p.Actor, Valid: true},
			Payload: journal.ApprovalDecidedPayload{ApprovalID: p.ID, Decision: p.Decision, DecidedBy: p.Actor},
		})
		if err != nil {
			return fmt.Errorf("decide approval %s: %w", p.ID, err)
		}
		head = entries[0].Seq
		return nil
	})
	if err == nil {
		s.hub.Committed(p.Room, head)
	}
	return err
}

// claimExecution takes the execution of an approved call, fenced by the
// lease: only the turn's current run executes, and a later run takes over
// from a dead one.
const claimExecution = `UPDATE approvals SET execution_lease = $2
WHERE id = $1 AND state = 'approved' AND executed_at IS NULL AND (execution_lease IS NULL OR execution_lease < $2)
  AND EXISTS (SELECT 1 FROM turns WHERE id = $3 AND lease_token = $2 AND state = 'running' FOR SHARE)`

// ExecutionParams names an approved call and the run about to execute it.
type ExecutionParams struct {
	Claim      *Claimed
	ApprovalID uuid.UUID
}

// ClaimExecution takes the execution of an approved call for the run
// holding the claim. A run that no longer owns the turn, or an execution
// another run holds with a newer lease, is ErrFenced.
func (s *Store) ClaimExecution(ctx context.Context, p ExecutionParams) error {
	return exec(ctx, s.client, ErrFenced, "claim execution of", p.Claim.Turn.ID, claimExecution, p.ApprovalID, p.Claim.Fence.LeaseToken, p.Claim.Turn.ID)
}

const recordExecution = `UPDATE approvals SET executed_at = now(), result = $2
WHERE id = $1 AND execution_lease = $3 AND executed_at IS NULL`

// RecordExecution stores an executed call's result, once, under the
// execution lease ClaimExecution took.
func (s *Store) RecordExecution(ctx context.Context, p ExecutionParams, result []byte) error {
	if _, err := s.client.ExecContext(ctx, recordExecution, p.ApprovalID, string(result), p.Claim.Fence.LeaseToken); err != nil {
		return fmt.Errorf("record execution of %s: %w", p.Claim.Turn.ID, err)
	}
	return nil
}
