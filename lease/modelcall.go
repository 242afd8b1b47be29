package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// A model call is one request a run made of the model gateway and what
// came back, stored redacted and bounded (turn replay). Its SQL lives here
// with the turn's because a call is stored under the run's lease.

// ModelCallParams is one model call of the run holding the claim, its
// request and response already encoded.
type ModelCallParams struct {
	Claim *Claimed
	// Step numbers the run's calls from 1.
	Step                      int64
	Purpose, Route            string
	Request, Response         []byte
	InputTokens, OutputTokens int
	Took                      time.Duration
	// Error is the call's failure, bounded; empty when it answered.
	Error string
}

const insertModelCall = `
INSERT INTO model_calls (id, conversation_id, turn_id, attempt, step, purpose, route, request, response,
  input_tokens, output_tokens, duration_ms, error)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
WHERE EXISTS (SELECT 1 FROM turns WHERE id = $3 AND lease_token = $14 AND state = 'running')`

// RecordModelCall stores one model call, fenced by the claim's lease
// token: a run that no longer owns the turn stores nothing (and gets
// ErrFenced).
func (s *Store) RecordModelCall(ctx context.Context, p ModelCallParams) error {
	t := p.Claim.Turn
	return exec(ctx, s.client, ErrFenced, "store a model call of", t.ID, insertModelCall, uuid.New(), t.ConversationID, t.ID, t.Attempt, p.Step,
		p.Purpose, p.Route, string(p.Request), string(p.Response), p.InputTokens, p.OutputTokens, p.Took.Milliseconds(), p.Error,
		p.Claim.Fence.LeaseToken)
}

// ModelCall is one stored model call of a turn, its request and response
// as stored (JSON).
type ModelCall struct {
	Attempt, Step             int64
	Purpose, Route            string
	Request, Response         []byte
	InputTokens, OutputTokens int64
	DurationMs                int64
	Error                     string
	At                        time.Time
}

// ModelCalls reads the first `first` stored model calls of a turn, in
// order (attempt, then step).
func (s *Store) ModelCalls(ctx context.Context, turnID uuid.UUID, first int) ([]ModelCall, error) {
	rows, err := s.client.QueryContext(ctx, `
SELECT attempt, step, purpose, route, request, response, input_tokens, output_tokens, duration_ms, error, created_at
FROM model_calls WHERE turn_id = $1 ORDER BY attempt, step LIMIT $2`, turnID, first)
	if err != nil {
		return nil, fmt.Errorf("model calls of %s: %w", turnID, err)
	}
	defer rows.Close()
	var out []ModelCall
	for rows.Next() {
		var c ModelCall
		if err := rows.Scan(&c.Attempt, &c.Step, &c.Purpose, &c.Route, &c.Request, &c.Response, &c.InputTokens, &c.OutputTokens,
			&c.DurationMs, &c.Error, &c.At); err != nil {
			return nil, fmt.Errorf("model calls of %s: %w", turnID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("model calls of %s: %w", turnID, err)
	}
	return out, nil
}
