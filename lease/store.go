package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/pg"
)

// ErrFenced reports a run write refused because the run's lease token is not
// the turn's current one, or the turn is no longer running. Nothing was
// written.
var ErrFenced = journal.ErrFenced

// ErrLeaseLost reports a renewal (or a terminal that renews) that found its
// claim gone or expired.
var ErrLeaseLost = errors.New("input lease lost")

// ErrNotClaimable reports a turn that is not the claimable head of its
// lane (it is running, finished, behind another turn, or the room is busy).
var ErrNotClaimable = errors.New("turn is not the claimable head of its lane")

// ErrNotRecoverable reports a turn that is not running with an expired
// lease (it is queued, finished, or its owner's lease is still live).
var ErrNotRecoverable = errors.New("turn is not recoverable: no expired running claim")

// Claimed is a run's hold on a turn.
type Claimed struct {
	Turn  *ent.Turn
	Fence journal.Fence
}

// Store is the turns' state machine over Postgres. After a transition
// commits, it tells the hub, so the room's readers and the runners wake.
type Store struct {
	client  *ent.Client
	hub     *journal.Hub
	metrics *metrics.Metrics
}

// WithMetrics is the store counting the terminals it commits in m.
func (s *Store) WithMetrics(m *metrics.Metrics) *Store {
	s.metrics = m
	return s
}

// NewStore returns the store over client, waking hub on commits.
func NewStore(client *ent.Client, hub *journal.Hub) *Store {
	return &Store{client: client, hub: hub}
}

// interpretError translates a storage error once, for the transition that
// got it: no row to move, or an index refusing the move (one running turn
// per room, one terminal per turn), both mean another actor moved the turn
// first, which is the transition's miss error. Anything else is wrapped
// with what was being done.
func interpretError(err, miss error, what string, turn uuid.UUID) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows), pg.IsUniqueViolation(err):
		return miss
	case errors.Is(err, ErrFenced), errors.Is(err, miss):
		return err
	}
	return fmt.Errorf("%s %s: %w", what, turn, err)
}

// queryRow runs a statement expected to return one row into dest, with its
// error interpreted.
func queryRow(ctx context.Context, q pg.Querier, miss error, what string, turn uuid.UUID, query string, args []any, dest ...any) error {
	return interpretError(pg.QueryRow(ctx, q, query, args, dest...), miss, what, turn)
}

// exec runs a statement expected to move exactly the rows it names: none
// moved is the miss.
func exec(ctx context.Context, q pg.Querier, miss error, what string, turn uuid.UUID, query string, args ...any) error {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return interpretError(err, miss, what, turn)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, turn, err)
	}
	if n == 0 {
		return miss
	}
	return nil
}

// inTx runs fn in a transaction and commits it; the transaction is rolled
// back when fn fails.
func (s *Store) inTx(ctx context.Context, what string, turn uuid.UUID, fn func(tx *ent.Tx) error) error {
	tx, err := s.client.Tx(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: begin: %w", what, turn, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s %s: commit: %w", what, turn, err)
	}
	return nil
}

// errNone is the miss of a read that may find nothing.
var errNone = errors.New("no row")
