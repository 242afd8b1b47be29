package turn

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/tracing"
)

// Service accepts turns and answers questions about them.
type Service struct {
	// Metrics counts acceptances and the terminals the service commits;
	// nil counts nothing.
	Metrics *metrics.Metrics
	// Tracer traces acceptances; the turn keeps the acceptance's span
	// context, and every run of it continues that trace. Nil traces
	// nothing.
	Tracer trace.Tracer
	Client *ent.Client
	// DB is the handle under Client. Acceptance is the hot path: its two
	// statements are prepared once per connection rather than parsed and
	// planned on every submission.
	DB *sql.DB
	// Unprepared sends the acceptance statements whole instead of
	// preparing them: DB goes through a pooler in transaction pooling
	// mode, which keeps no named statement from one transaction to the
	// next.
	Unprepared bool
	Hub        *journal.Hub
	// Runner, when set, is this process's runner: a turn accepted into an
	// idle lane is claimed for it in the accepting transaction, so the run
	// starts with no second commit and no wake-up in between.
	Runner Starter

	prepMu       sync.Mutex
	take, accept *sql.Stmt

	// afterTake and retrying, when set (tests only), run in each
	// acceptance attempt once the room's row is locked, and when an
	// attempt the database rolled back is run again, with its error.
	afterTake func()
	retrying  func(error)
}

// Starter is the part of a runner acceptance reaches: the accept-time
// claim (lease.Store.ClaimAccepted) in a run slot of its own.
type Starter interface {
	// ClaimAccepted reserves a run slot and claims t in tx, the
	// transaction accepting it into an idle lane; ok is false, and nothing
	// changed, when the runner has no free slot or the claim's guard found
	// an earlier turn in the lane. Then t stays queued, and tx commits it.
	ClaimAccepted(ctx context.Context, tx *sql.Tx, t *ent.Turn, agentVersion int) (c *lease.Claimed, ok bool, err error)
	// StartClaimed runs a claim whose transaction committed.
	StartClaimed(c *lease.Claimed)
	// Unclaim gives back the slot of a claim whose transaction did not
	// commit.
	Unclaim(c *lease.Claimed)
}

// prepare prepares the acceptance statements once; a failure (the
// database away) is retried on the next submission.
func (s *Service) prepare(ctx context.Context) (take, accept *sql.Stmt, err error) {
	if s.Unprepared {
		return nil, nil, nil
	}
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if s.take == nil {
		if s.take, err = s.DB.PrepareContext(ctx, takePosition); err != nil {
			return nil, nil, fmt.Errorf("prepare acceptance: %w", err)
		}
	}
	if s.accept == nil {
		if s.accept, err = s.DB.PrepareContext(ctx, acceptTurn); err != nil {
			return nil, nil, fmt.Errorf("prepare acceptance: %w", err)
		}
	}
	return s.take, s.accept, nil
}

// queryIn runs stmt in tx, or query itself when the service prepares
// nothing (stmt is nil).
func queryIn(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, query string, args ...any) (*sql.Rows, error) {
	if stmt == nil {
		return tx.QueryContext(ctx, query, args...)
	}
	return tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
}

// Submission is one member input.
type Submission struct {
	Member         authority.Member
	ConversationID uuid.UUID
	Text           string
	IdempotencyKey string
	// Specialist routes this one turn to a specialist of the effective
	// roster; anything else is FORBIDDEN.
	Specialist string
	// Documents, when given, are exactly the documents the turn may see
	// (each must be readable by the member now).
	Documents []uuid.UUID
	// Artifacts are retained artifacts selected as the turn's input: the
	// member's own, or referenced in a room they are in.
	Artifacts []uuid.UUID
}

// takePosition takes the next journal position of the room, only if the
// author is a member of it, and reads in the same statement the turn the
// idempotency key ($3) already names, if any, and what the authority
// bundle needs (authority.BundleColumns): the room's audience and agent's
// current version, and the member's permissions and roster as of now. The
// room's row lock, held to commit, orders this submission against
// membership changes and other appends.
//
// It does not tell whether the lane is idle: under READ COMMITTED its
// subqueries read the snapshot taken before it waited for the room's
// row, which misses an acceptance committed meanwhile. acceptTurn, the
// next statement, reads the lane after the lock.
var takePosition = `
WITH room AS (
  ` + journal.TakePositions("$1", "1", authority.MemberSQL("$1", "$2"), "id", "kind", "audience_version", "agent_id") + `
)
SELECT room.base + 1,
       now(),
       (SELECT id FROM turns WHERE conversation_id = $1 AND author_id = $2 AND idempotency_key = $3),
       ` + authority.BundleColumns("$2") + `
FROM room
` + authority.BundleJoin

// acceptTurn inserts the turn and, only if it was new, its turn_accepted
// entry at the position taken by takePosition. A key already used leaves
// both out, and the caller rolls back the position it took.
//
// It also says whether the lane was idle before this turn: no active
// turn, nothing queued or running (its subquery does not see the turn the
// statement inserts). The statement starts once the room's row lock is
// held, so its snapshot holds every acceptance committed before this one,
// and every later one waits for the lock. The idle lane is a hint for
// whether to try the accept-time claim; the claim's own statement decides
// (lease.Store.ClaimAccepted).
const acceptTurn = `
WITH t AS (
  INSERT INTO turns (id, conversation_id, author_id, idempotency_key, input, position, agent_version_id, authority_bundle, authority_digest, specialist, trace_parent)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($11, ''), NULLIF($12, ''))
  ON CONFLICT (conversation_id, author_id, idempotency_key) DO NOTHING
  RETURNING id, conversation_id, position
), accepted AS (
  INSERT INTO journal_entries (conversation_id, seq, kind, turn_id, attempt, actor_id, payload)
  SELECT t.conversation_id, t.position, 'turn_accepted', t.id, 0, $3, $10 FROM t
  RETURNING created_at
)
SELECT accepted.created_at,
       (SELECT active_turn_id IS NULL FROM conversations WHERE id = $2) AND NOT EXISTS (
         SELECT 1 FROM turns WHERE conversation_id = $2 AND state IN ('queued', 'running'))
FROM accepted`

// notInRoster refuses a specialist outside the caller's effective roster:
// one that does not exist is refused alike, and neither is named.
func notInRoster() error {
	return &errcode.Error{Code: errcode.Forbidden, Field: "specialist", Message: "specialist is not in your effective roster for this agent"}
}

// pin completes the bundle inside the accepting transaction: the one-turn
// specialist route (from the effective roster only) and the resource
// manifest — the documents and artifacts the turn may see.
func (s *Service) pin(ctx context.Context, tx *sql.Tx, b *authority.Bundle, agentVerID *uuid.UUID, in Submission, acceptedAt time.Time) error {
	if in.Specialist != "" {
		if !slices.Contains(b.Roster, in.Specialist) {
			return notInRoster()
		}
		sp, err := authority.LatestSpecialist(ctx, tx, in.Specialist)
		if errors.Is(err, authority.ErrNoSpecialist) {
			return notInRoster()
		}
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		b.AgentID, *agentVerID, b.AgentVersion, b.Controller, b.ModelRoute = sp.AgentID, sp.VersionID, sp.Version, sp.Controller, sp.ModelRoute
		b.AgentVersionID = *agentVerID
		b.Specialist = in.Specialist
	}
	if len(in.Documents) > 0 {
		may, err := authority.MayReadDocuments(ctx, tx, in.Member.ID)
		if err != nil {
			return fmt.Errorf("submit: documents: %w", err)
		}
		readable := 0
		if may {
			if readable, err = authority.ReadableDocuments(ctx, tx, authority.Principal(in.Member.Email), in.Documents); err != nil {
				return fmt.Errorf("submit: documents: %w", err)
			}
		}
		if readable != len(uniq(in.Documents)) {
			return &errcode.Error{Code: errcode.NotFound, Field: "documentIds", Message: "a selected document was not found"}
		}
		b.Manifest.Documents = uniq(in.Documents)
	} else {
		// The turn may see the documents that existed when it was accepted.
		acceptedAt = acceptedAt.UTC()
		b.Manifest.DocumentsBefore = &acceptedAt
	}
	for _, id := range uniq(in.Artifacts) {
		if _, err := resource.StatArtifact(ctx, tx, in.Member.ID, id); err != nil {
			if errors.Is(err, resource.ErrArtifactNotFound) {
				return &errcode.Error{Code: errcode.NotFound, Field: "artifactIds", Message: "a selected artifact was not found"}
			}
			return fmt.Errorf("submit: artifact %s: %w", id, err)
		}
		b.Manifest.Artifacts = append(b.Manifest.Artifacts, id)
	}
	return nil
}

func uniq(ids []uuid.UUID) []uuid.UUID {
	var out []uuid.UUID
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// Submit durably accepts a member's input and returns its turn. It returns
// only after the turn and its turn_accepted entry are committed. A retry
// with the same idempotency key returns the same turn; the same key with
// other text is a CONFLICT; a room the member is not in is NOT_FOUND.
func (s *Service) Submit(ctx context.Context, in Submission) (t *ent.Turn, err error) {
	ctx, span := tracing.Or(s.Tracer).Start(ctx, "turn.submit", trace.WithAttributes(
		attribute.String("turngate.room", in.ConversationID.String()), attribute.String("turngate.member", in.Member.ID.String())))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "submit failed")
		} else if t != nil {
			span.SetAttributes(attribute.String("turngate.turn", t.ID.String()), attribute.Int64("turngate.position", t.Position))
		}
		span.End()
	}()
	for attempt := 1; ; attempt++ {
		t, err := s.submit(ctx, in)
		if err == nil || !pg.IsTransient(err) || attempt == maxSubmitAttempts {
			return t, err
		}
		if s.retrying != nil {
			s.retrying(err)
		}
		// The database rolled the attempt back to break a deadlock or a
		// serialization conflict: nothing of it was written. Run it again
		// with the same key, which finds the turn if another attempt
		// (this one's original, say) was accepted meanwhile.
	}
}

// maxSubmitAttempts bounds how often one submission is run again after
// the database rolled it back; past it the error reaches the client as
// UNAVAILABLE, to retry with the same key.
const maxSubmitAttempts = 3

// submit is one acceptance attempt.
func (s *Service) submit(ctx context.Context, in Submission) (*ent.Turn, error) {
	start := time.Now()
	take, accept, err := s.prepare(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("submit: begin: %w", err)
	}
	defer tx.Rollback()

	var (
		pos        int64
		used       uuid.NullUUID // the turn the key already names
		row        authority.BundleRow
		foundRoom  bool
		acceptedAt time.Time
	)
	rows, err := queryIn(ctx, tx, take, takePosition, in.ConversationID, in.Member.ID, in.IdempotencyKey)
	if err != nil {
		return nil, fmt.Errorf("submit: take position: %w", err)
	}
	for rows.Next() {
		foundRoom = true
		if err := rows.Scan(append([]any{&pos, &acceptedAt, &used}, row.Dest()...)...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("submit: take position: %w", err)
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return nil, fmt.Errorf("submit: take position: %w", err)
	}
	if !foundRoom {
		return nil, errNoRoom(in.ConversationID)
	}
	if used.Valid {
		// A retry: it answers from its turn — before any check of this
		// input's selections, and without waiting on the turn's row,
		// which a run may hold. The rollback gives the position back.
		tx.Rollback()
		return s.existing(ctx, in)
	}
	if s.afterTake != nil {
		s.afterTake()
	}
	b := authority.ResolveBundle(in.Member, in.ConversationID, row)
	agentVerID := b.AgentVersionID
	if err := s.pin(ctx, tx, &b, &agentVerID, in, acceptedAt); err != nil {
		return nil, err
	}
	digest, raw, err := b.Digest()
	if err != nil {
		return nil, err
	}

	payload, err := json.Marshal(journal.AcceptedPayload{Text: in.Text, AuthorID: in.Member.ID, AuthorName: in.Member.DisplayName})
	if err != nil {
		return nil, err
	}
	id := uuid.New()
	traceParent := tracing.Parent(ctx)
	rows, err = queryIn(ctx, tx, accept, acceptTurn, id, in.ConversationID, in.Member.ID, in.IdempotencyKey, in.Text, pos,
		agentVerID, string(raw), digest, string(payload), b.Specialist, traceParent)
	if err != nil {
		return nil, fmt.Errorf("submit: accept turn: %w", err)
	}
	var (
		created time.Time
		idle    bool // the lane was, read after the room's lock
	)
	inserted := false
	for rows.Next() {
		inserted = true
		if err := rows.Scan(&created, &idle); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return nil, fmt.Errorf("submit: accept turn: %w", err)
	}
	if !inserted {
		// The key was used before (or by a racing retry that committed
		// first): converge on that turn. The rollback gives our position
		// back, so the journal stays dense.
		tx.Rollback()
		return s.existing(ctx, in)
	}
	t := &ent.Turn{
		ID: id, ConversationID: in.ConversationID, AuthorID: in.Member.ID, IdempotencyKey: in.IdempotencyKey,
		Input: in.Text, Position: pos, State: entturn.StateQueued, AgentVersionID: agentVerID,
		AuthorityBundle: raw, AuthorityDigest: digest, CreatedAt: created, TraceParent: traceParent,
	}
	head := pos
	var claimed *lease.Claimed
	if idle && s.Runner != nil {
		c, ok, err := s.Runner.ClaimAccepted(ctx, tx, t, b.AgentVersion)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		if ok {
			claimed, head = c, pos+1
		}
	}
	if err := tx.Commit(); err != nil {
		if claimed != nil {
			s.Runner.Unclaim(claimed)
		}
		// A failed COMMIT has an unknown outcome: the key tells.
		if t, rerr := s.existing(ctx, in); rerr == nil {
			return t, nil
		}
		return nil, fmt.Errorf("submit: commit: %w", err)
	}
	s.Hub.Committed(in.ConversationID, head)
	s.Metrics.Accepted(time.Since(start))
	if claimed != nil {
		running := *claimed.Turn // a copy: the run owns its own
		s.Runner.StartClaimed(claimed)
		return &running, nil
	}
	return t, nil
}

// errNoRoom is the answer for a room the member is not in, or that does
// not exist: the same words for both, naming nothing the caller did not
// send, so the answer tells no one that a room exists.
func errNoRoom(uuid.UUID) error {
	return errcode.New(errcode.NotFound, "conversation not found")
}

// existing finds the turn of a submission's idempotency key, and checks
// that it was accepted for the same whole input (sameInput). No turn with
// the key is ent's not-found error.
func (s *Service) existing(ctx context.Context, in Submission) (*ent.Turn, error) {
	t, err := s.Client.Turn.Query().Where(
		entturn.ConversationID(in.ConversationID),
		entturn.AuthorID(in.Member.ID),
		entturn.IdempotencyKey(in.IdempotencyKey),
	).Only(ctx)
	if err != nil {
		return nil, err
	}
	if t.Input != in.Text {
		return nil, &errcode.Error{Code: errcode.Conflict, Field: "idempotencyKey", Message: "idempotencyKey was already used with a different message"}
	}
	same, err := sameInput(t, in)
	if err != nil {
		return nil, err
	}
	if !same {
		return nil, &errcode.Error{Code: errcode.Conflict, Field: "idempotencyKey", Message: "idempotencyKey was already used with other documents, artifacts or specialist"}
	}
	return t, nil
}

// sameInput reports whether t was accepted for in's selections: the same
// set of documents and of artifacts (order and repeats aside) and the same
// specialist route, as its pinned bundle records them.
func sameInput(t *ent.Turn, in Submission) (bool, error) {
	var b authority.Bundle
	if err := json.Unmarshal(t.AuthorityBundle, &b); err != nil {
		return false, fmt.Errorf("turn %s: bundle: %w", t.ID, err)
	}
	return sameSet(b.Manifest.Documents, in.Documents) && sameSet(b.Manifest.Artifacts, in.Artifacts) &&
		b.Specialist == in.Specialist, nil
}

func sameSet(a, b []uuid.UUID) bool {
	a, b = uniq(a), uniq(b)
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// Get returns a turn by id.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*ent.Turn, error) {
	t, err := s.Client.Turn.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, authority.TurnNotFound()
	}
	if err != nil {
		return nil, fmt.Errorf("get turn %s: %w", id, err)
	}
	return t, nil
}

// store is the lease store over the service's handles.
func (s *Service) store() *lease.Store { return lease.NewStore(s.Client, s.Hub).WithMetrics(s.Metrics) }
