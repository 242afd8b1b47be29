package lease_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	entconv "github.com/turngate/turngate/ent/conversation"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/turn"
)

// TestTransitions runs each Store method that moves a turn, or writes for
// the run holding it, against each starting state that matters, as River's
// driver tests run each driver method: the state as the store itself
// leaves it, the call, the error it must return, and the rows it must
// leave. A refused call changes nothing: the turn's row, its room's lane
// and journal, its commands, approvals and evidence read the same after it
// as before.
//
// What the table pins down beyond the doc: an expired lease that nobody
// took over is not a fence. The lease token is; expiry only lets Recover
// take the turn over. Until then the run's fenced writes (a checkpoint,
// steering, an execution claim, evidence, a terminal, a release) still
// land, and only Renew and a renewing Terminal refuse it (ErrLeaseLost).
func TestTransitions(t *testing.T) {
	t.Parallel()
	// One world for the table, a room of its own for each row: a room is
	// a lane, and every transition here is decided within one.
	env := testkit.New(t)
	store := lease.NewStore(env.Client, env.Hub)
	launch := documentID(t, env, "Launch plan")

	// The starting states, each built the way the store leaves it.
	var (
		queued = state{"queued", func(t *testing.T, b *bundle) {
			b.accept(t)
		}}
		behind = state{"queued behind a queued turn", func(t *testing.T, b *bundle) {
			b.env.Submit(t, b.env.Alice, b.room, "an earlier question")
			b.accept(t)
		}}
		running = state{"running", func(t *testing.T, b *bundle) {
			b.accept(t)
			b.claim(t)
		}}
		expired = state{"lease expired", func(t *testing.T, b *bundle) {
			b.accept(t)
			b.claim(t)
			b.expire(t)
		}}
		// The stale token: the run's lease expired and another run
		// recovered the turn; the call is made with the old claim.
		stale = state{"stale token", func(t *testing.T, b *bundle) {
			b.accept(t)
			b.claim(t)
			b.expire(t)
			b.takeOver(t)
		}}
		// Handed back to its lane: the run's token is still the turn's,
		// but the turn is queued.
		released = state{"released", func(t *testing.T, b *bundle) {
			b.accept(t)
			b.claim(t)
			if err := b.store.Release(t.Context(), lease.ReleaseParams{Fence: b.run.Fence}); err != nil {
				t.Fatal(err)
			}
		}}
		ended = state{"ended", func(t *testing.T, b *bundle) {
			b.accept(t)
			b.claim(t)
			if err := b.store.Terminal(t.Context(), lease.TerminalParams{Fence: b.run.Fence, State: entturn.StateFailed,
				Reason: outcome.ReasonRuntimeFailed}); err != nil {
				t.Fatal(err)
			}
		}}
		executing = state{"running, execution claimed", func(t *testing.T, b *bundle) {
			running.build(t, b)
			if err := b.store.ClaimExecution(t.Context(), b.execution(b.run)); err != nil {
				t.Fatal(err)
			}
		}}
		// The successor claimed the execution the stale run had claimed.
		executionStale = state{"stale token, execution taken over", func(t *testing.T, b *bundle) {
			executing.build(t, b)
			b.expire(t)
			b.takeOver(t)
			if err := b.store.ClaimExecution(t.Context(), b.execution(b.successor)); err != nil {
				t.Fatal(err)
			}
		}}
		executed = state{"running, execution recorded", func(t *testing.T, b *bundle) {
			executing.build(t, b)
			if err := b.store.RecordExecution(t.Context(), b.execution(b.run), []byte(`{"content":"first"}`)); err != nil {
				t.Fatal(err)
			}
		}}
	)

	// The calls, each made with the bundle's run's claim.
	var (
		claim = func(t *testing.T, b *bundle) (err error) {
			b.claimed, err = b.store.Claim(t.Context(), lease.ClaimParams{TurnID: b.turn.ID, Owner: "claimer", TTL: time.Minute})
			return err
		}
		claimAccepted = func(t *testing.T, b *bundle) error {
			ctx := t.Context()
			tx, err := b.env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			// Acceptance holds the room's row lock.
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, b.room); err != nil {
				t.Fatal(err)
			}
			b.claimed, err = b.store.ClaimAccepted(ctx, tx, lease.ClaimAcceptedParams{Turn: b.turn, AgentVersion: 1, Owner: "acceptor", TTL: time.Minute})
			if err != nil && !errors.Is(err, lease.ErrNotClaimable) {
				return err
			}
			// Refused, the acceptance still commits.
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit after the claim: %v", err)
			}
			return err
		}
		checkpoint = func(t *testing.T, b *bundle) error {
			return b.store.Checkpoint(t.Context(), lease.CheckpointParams{Claim: b.run, Checkpoint: []byte(`{"step":1}`),
				Drafts: []journal.Draft{{Kind: journal.KindCheckpoint, TurnID: b.turnID(), Attempt: b.run.Turn.Attempt}}})
		}
		claimSteers = func(t *testing.T, b *bundle) (err error) {
			b.steers, err = b.store.ClaimSteers(t.Context(), b.run)
			return err
		}
		claimExecution = func(t *testing.T, b *bundle) error {
			return b.store.ClaimExecution(t.Context(), b.execution(b.run))
		}
		recordExecution = func(t *testing.T, b *bundle) error {
			return b.store.RecordExecution(t.Context(), b.execution(b.run), []byte(`{"content":"done"}`))
		}
		addEvidence = func(t *testing.T, b *bundle) error {
			return b.store.AddEvidence(t.Context(), lease.EvidenceParams{Claim: b.run, Documents: []uuid.UUID{b.document}})
		}
		recoverRun = func(grace time.Duration) func(*testing.T, *bundle) error {
			return func(t *testing.T, b *bundle) (err error) {
				b.claimed, err = b.store.Recover(t.Context(), lease.RecoverParams{TurnID: b.turn.ID, Owner: "recoverer", TTL: time.Minute, Grace: grace})
				return err
			}
		}
		terminal = func(renewFor string) func(*testing.T, *bundle) error {
			return func(t *testing.T, b *bundle) error {
				answer := "the answer"
				return b.store.Terminal(t.Context(), lease.TerminalParams{Fence: b.run.Fence, State: entturn.StateCompleted,
					Reason: outcome.ReasonCompleted, Answer: &answer, RenewFor: renewFor})
			}
		}
		renew = func(owner string) func(*testing.T, *bundle) error {
			return func(t *testing.T, b *bundle) error {
				return b.store.Renew(t.Context(), lease.RenewParams{Fence: b.run.Fence, Owner: owner, TTL: time.Hour.Seconds()})
			}
		}
		release = func(t *testing.T, b *bundle) error {
			return b.store.Release(t.Context(), lease.ReleaseParams{Fence: b.run.Fence})
		}
		cancelQueued = func(t *testing.T, b *bundle) error {
			ctx := t.Context()
			tx, err := b.env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			b.gotRoom, err = b.store.CancelQueued(ctx, tx, lease.CancelQueuedParams{TurnID: b.turn.ID})
			if err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			return nil
		}
		revoke = func(t *testing.T, b *bundle) error {
			ctx := t.Context()
			tx, err := b.env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			p := lease.RevokeParams{Room: b.room, Author: b.turn.AuthorID}
			if err := b.store.LockAuthorTurns(ctx, tx, p); err != nil {
				t.Fatal(err)
			}
			if _, b.revoked, err = b.store.Revoke(ctx, tx, p); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			return nil
		}
	)

	tests := []struct {
		method string
		state  state
		call   func(*testing.T, *bundle) error
		want   error
		check  check
	}{
		{"Claim", queued, claim, nil, started("claimer", 1, 1, false)},
		{"Claim", released, claim, nil, started("claimer", 2, 2, false)},
		{"Claim", behind, claim, lease.ErrNotClaimable, unchanged},
		{"Claim", running, claim, lease.ErrNotClaimable, unchanged},
		{"Claim", expired, claim, lease.ErrNotClaimable, unchanged},
		{"Claim", stale, claim, lease.ErrNotClaimable, unchanged},
		{"Claim", ended, claim, lease.ErrNotClaimable, unchanged},

		{"ClaimAccepted", queued, claimAccepted, nil, started("acceptor", 1, 1, false)},
		{"ClaimAccepted", running, claimAccepted, lease.ErrNotClaimable, unchanged},

		{"Checkpoint", running, checkpoint, nil, checkpointed},
		{"Checkpoint", expired, checkpoint, nil, checkpointed},
		{"Checkpoint", stale, checkpoint, lease.ErrFenced, unchanged},
		{"Checkpoint", released, checkpoint, lease.ErrFenced, unchanged},
		{"Checkpoint", ended, checkpoint, lease.ErrFenced, unchanged},

		{"ClaimSteers", running, claimSteers, nil, steered},
		{"ClaimSteers", expired, claimSteers, nil, steered},
		{"ClaimSteers", stale, claimSteers, lease.ErrFenced, unchanged},
		{"ClaimSteers", released, claimSteers, lease.ErrFenced, unchanged},
		{"ClaimSteers", ended, claimSteers, lease.ErrFenced, unchanged},

		{"ClaimExecution", running, claimExecution, nil, executionClaimed},
		{"ClaimExecution", expired, claimExecution, nil, executionClaimed},
		{"ClaimExecution", stale, claimExecution, lease.ErrFenced, unchanged},
		{"ClaimExecution", executionStale, claimExecution, lease.ErrFenced, unchanged},
		{"ClaimExecution", ended, claimExecution, lease.ErrFenced, unchanged},

		{"RecordExecution", executing, recordExecution, nil, executionRecorded},
		// Refused, RecordExecution still returns nil: its result is
		// recorded once, under the execution lease, and a run whose
		// execution lease moved on learns nothing from it.
		{"RecordExecution", executionStale, recordExecution, nil, unchanged},
		{"RecordExecution", executed, recordExecution, nil, unchanged},

		{"AddEvidence", running, addEvidence, nil, evidenced},
		{"AddEvidence", expired, addEvidence, nil, evidenced},
		{"AddEvidence", stale, addEvidence, lease.ErrFenced, unchanged},
		{"AddEvidence", ended, addEvidence, lease.ErrFenced, unchanged},

		{"Recover", expired, recoverRun(0), nil, started("recoverer", 2, 2, true)},
		{"Recover (within grace)", expired, recoverRun(time.Hour), lease.ErrNotRecoverable, unchanged},
		{"Recover", running, recoverRun(0), lease.ErrNotRecoverable, unchanged},
		{"Recover", stale, recoverRun(0), lease.ErrNotRecoverable, unchanged},
		{"Recover", queued, recoverRun(0), lease.ErrNotRecoverable, unchanged},
		{"Recover", ended, recoverRun(0), lease.ErrNotRecoverable, unchanged},

		{"Terminal", running, terminal(""), nil, completed},
		{"Terminal", expired, terminal(""), nil, completed},
		{"Terminal", stale, terminal(""), lease.ErrFenced, unchanged},
		{"Terminal", released, terminal(""), lease.ErrFenced, unchanged},
		{"Terminal", ended, terminal(""), lease.ErrFenced, unchanged},
		{"Terminal (renewing)", running, terminal("first-owner"), nil, completed},
		{"Terminal (renewing)", expired, terminal("first-owner"), lease.ErrLeaseLost, unchanged},
		{"Terminal (renewing)", stale, terminal("first-owner"), lease.ErrLeaseLost, unchanged},

		{"Renew", running, renew("first-owner"), nil, renewed},
		{"Renew (another owner)", running, renew("someone-else"), lease.ErrLeaseLost, unchanged},
		{"Renew", expired, renew("first-owner"), lease.ErrLeaseLost, unchanged},
		{"Renew", stale, renew("first-owner"), lease.ErrLeaseLost, unchanged},
		{"Renew", released, renew("first-owner"), lease.ErrLeaseLost, unchanged},
		{"Renew", ended, renew("first-owner"), lease.ErrLeaseLost, unchanged},

		{"Release", running, release, nil, handedBack},
		{"Release", expired, release, nil, handedBack},
		{"Release", stale, release, lease.ErrFenced, unchanged},
		{"Release", released, release, lease.ErrFenced, unchanged},
		{"Release", ended, release, lease.ErrFenced, unchanged},

		// CancelQueued writes the turn's row only: its caller's
		// transaction journals the terminal and settles the command.
		{"CancelQueued", queued, cancelQueued, nil, cancelled},
		{"CancelQueued", released, cancelQueued, nil, cancelled},
		{"CancelQueued", running, cancelQueued, lease.ErrNotClaimable, unchanged},
		{"CancelQueued", ended, cancelQueued, lease.ErrNotClaimable, unchanged},

		{"Revoke", queued, revoke, nil, revoked},
		{"Revoke", running, revoke, nil, revoked},
		{"Revoke", stale, revoke, nil, revoked},
		{"Revoke", ended, revoke, nil, revokedNone},
	}
	for _, tt := range tests {
		t.Run(tt.method+"/"+tt.state.name, func(t *testing.T) {
			t.Parallel()
			b := &bundle{env: env, store: store, document: launch, room: newRoom(t, env)}
			tt.state.build(t, b)
			before := b.snapshot(t)
			b.head = before.head
			if err := tt.call(t, b); !errors.Is(err, tt.want) {
				t.Fatalf("%s: %v, want %v", tt.method, err, tt.want)
			}
			tt.check(t, b, before)
		})
	}
}

// A state is a starting state of the turn under test, built in the
// bundle's room through the services and the store.
type state struct {
	name  string
	build func(*testing.T, *bundle)
}

// A check asserts what a call left, given what was there before it.
type check func(t *testing.T, b *bundle, before snapshot)

// bundle is one row's world: its room, the turn under test and the claims
// on it, and what the call returned besides its error.
type bundle struct {
	env      *testkit.Env
	store    *lease.Store
	document uuid.UUID // a document to record as evidence
	room     uuid.UUID

	turn *ent.Turn // as accepted
	// run is the claim the call is made with: the turn's current one, or
	// a stale one when successor took the turn over.
	run, successor *lease.Claimed
	steer          uuid.UUID // a steer sent at acceptance
	approved       uuid.UUID // an approved call of the turn
	pending        uuid.UUID // a call of the turn waiting for a decision
	head           int64     // the room's journal head before the call

	claimed *lease.Claimed
	steers  []lease.Steer
	gotRoom uuid.UUID
	revoked int
}

const steerText = "shorter, please"

// accept submits the turn under test, steers it and asks for two
// approvals of its calls, one of which its author approves.
func (b *bundle) accept(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	b.turn = b.env.Submit(t, b.env.Alice, b.room, "the question")
	b.steer = uuid.New()
	if _, err := b.env.Turns.Steer(ctx, b.env.Alice, b.steer, b.turn.ID, steerText); err != nil {
		t.Fatal(err)
	}
	b.approved, b.pending = uuid.New(), uuid.New()
	for i, id := range []uuid.UUID{b.approved, b.pending} {
		if _, err := b.env.DB.ExecContext(ctx, `INSERT INTO approvals (id, conversation_id, turn_id, call_id, tool, arguments, expires_at)
VALUES ($1, $2, $3, $4, 'send_webhook', '{}', now() + interval '1 hour')`, id, b.room, b.turn.ID, "call_"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.env.Turns.DecideApproval(ctx, b.env.Alice, b.approved, turn.DecisionApprove); err != nil {
		t.Fatal(err)
	}
}

// claim starts the turn's first attempt, for first-owner.
func (b *bundle) claim(t *testing.T) {
	t.Helper()
	c, err := b.store.Claim(t.Context(), lease.ClaimParams{TurnID: b.turn.ID, Owner: "first-owner", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b.run = c
}

// expire ends the running turn's lease by the database clock, as a run
// that stopped renewing leaves it a minute later.
func (b *bundle) expire(t *testing.T) {
	t.Helper()
	if _, err := b.env.DB.ExecContext(t.Context(), `UPDATE turns SET lease_expires_at = now() - interval '1 minute' WHERE id = $1 AND state = 'running'`,
		b.turn.ID); err != nil {
		t.Fatal(err)
	}
}

// takeOver recovers the expired turn for a successor, whose lease is live:
// the run's token is stale from then on.
func (b *bundle) takeOver(t *testing.T) {
	t.Helper()
	c, err := b.store.Recover(t.Context(), lease.RecoverParams{TurnID: b.turn.ID, Owner: "successor", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b.successor = c
}

// current is the claim that holds the turn now, if one ever did.
func (b *bundle) current() *lease.Claimed {
	if b.successor != nil {
		return b.successor
	}
	return b.run
}

func (b *bundle) execution(c *lease.Claimed) lease.ExecutionParams {
	return lease.ExecutionParams{Claim: c, ApprovalID: b.approved}
}

func (b *bundle) turnID() uuid.NullUUID { return uuid.NullUUID{UUID: b.turn.ID, Valid: true} }

func (b *bundle) read(t *testing.T) *ent.Turn {
	t.Helper()
	got, err := b.env.Client.Turn.Get(t.Context(), b.turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// holds reports whether cond, an SQL condition on the turn's row, holds
// now by the database clock.
func (b *bundle) holds(t *testing.T, cond string) bool {
	t.Helper()
	var ok bool
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT `+cond+` FROM turns WHERE id = $1`, b.turn.ID).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func (b *bundle) active(t *testing.T) uuid.NullUUID {
	t.Helper()
	var id uuid.NullUUID
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT active_turn_id FROM conversations WHERE id = $1`, b.room).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// command reads the state of a command and the lease token it was
// delivered under.
func (b *bundle) command(t *testing.T, id uuid.UUID) (string, sql.NullInt64) {
	t.Helper()
	var state string
	var token sql.NullInt64
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT state, delivered_lease_token FROM commands WHERE id = $1`, id).Scan(&state, &token); err != nil {
		t.Fatal(err)
	}
	return state, token
}

// approval reads an approval's state, execution lease and result.
func (b *bundle) approval(t *testing.T, id uuid.UUID) (state string, leased sql.NullInt64, result sql.NullString) {
	t.Helper()
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT state, execution_lease, result::text FROM approvals WHERE id = $1`, id).
		Scan(&state, &leased, &result); err != nil {
		t.Fatal(err)
	}
	return state, leased, result
}

// written returns the entries the call journaled in the room.
func (b *bundle) written(t *testing.T) []journal.Entry {
	t.Helper()
	var out []journal.Entry
	for _, e := range b.env.Entries(t, b.room) {
		if e.Seq > b.head {
			out = append(out, e)
		}
	}
	return out
}

func kinds(es []journal.Entry) string {
	var ks []string
	for _, e := range es {
		ks = append(ks, string(e.Kind))
	}
	return strings.Join(ks, " ")
}

// snapshot is what a call may change, read in parts: a check names the
// parts a call changed, and every other part must read as before.
type snapshot struct {
	parts map[string]string
	head  int64
}

// snapshotQuery reads the parts of a snapshot of the turn ($1) in its room
// ($2), each as text.
const snapshotQuery = `
SELECT
  (SELECT row_to_json(t)::text FROM (SELECT state, lease_owner, lease_token, lease_expires_at, attempt, started_at
     FROM turns WHERE id = $1) t),
  (SELECT row_to_json(t)::text FROM (SELECT checkpoint, usage, answer, terminal_reason, finished_at
     FROM turns WHERE id = $1) t),
  (SELECT COALESCE(active_turn_id::text, 'none') FROM conversations WHERE id = $2),
  (SELECT format('%s entries through %s', count(*), COALESCE(max(seq), 0)) FROM journal_entries WHERE conversation_id = $2),
  (SELECT COALESCE(json_agg(c ORDER BY c.id)::text, '[]') FROM
     (SELECT id, state, delivered_lease_token, delivered_at FROM commands WHERE turn_id = $1) c),
  (SELECT COALESCE(json_agg(a ORDER BY a.id)::text, '[]') FROM
     (SELECT id, state, decided_at, execution_lease, executed_at, result FROM approvals WHERE turn_id = $1) a),
  (SELECT count(*)::text FROM turn_evidence WHERE turn_id = $1),
  (SELECT COALESCE(max(seq), 0) FROM journal_entries WHERE conversation_id = $2)`

var snapshotParts = []string{"lease", "turn", "room", "journal", "commands", "approvals", "evidence"}

func (b *bundle) snapshot(t *testing.T) snapshot {
	t.Helper()
	vals := make([]string, len(snapshotParts))
	dest := make([]any, 0, len(vals)+1)
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	var s snapshot
	dest = append(dest, &s.head)
	if err := b.env.DB.QueryRowContext(t.Context(), snapshotQuery, b.turn.ID, b.room).Scan(dest...); err != nil {
		t.Fatal(err)
	}
	s.parts = make(map[string]string, len(vals))
	for i, name := range snapshotParts {
		s.parts[name] = vals[i]
	}
	return s
}

// changedOnly fails unless every part of the snapshot but the ones named
// reads as before the call.
func changedOnly(t *testing.T, b *bundle, before snapshot, parts ...string) {
	t.Helper()
	after := b.snapshot(t)
	for _, name := range snapshotParts {
		if !slices.Contains(parts, name) && after.parts[name] != before.parts[name] {
			t.Errorf("%s changed:\n  before %s\n  after  %s", name, before.parts[name], after.parts[name])
		}
	}
}

// unchanged: the call changed nothing.
func unchanged(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before)
}

// started: the call started an attempt of the turn for owner.
func started(owner string, attempt int, token int64, recovered bool) check {
	return func(t *testing.T, b *bundle, before snapshot) {
		t.Helper()
		changedOnly(t, b, before, "lease", "room", "journal")
		got := b.read(t)
		if got.State != entturn.StateRunning || got.LeaseOwner == nil || *got.LeaseOwner != owner ||
			got.Attempt != attempt || got.LeaseToken != token || got.StartedAt == nil {
			t.Errorf("turn %s by %v, attempt %d, token %d, started %v; want running by %s, attempt %d, token %d",
				got.State, got.LeaseOwner, got.Attempt, got.LeaseToken, got.StartedAt, owner, attempt, token)
		}
		if !b.holds(t, `lease_expires_at > now()`) {
			t.Error("the new lease has expired already")
		}
		if active := b.active(t); active != (uuid.NullUUID{UUID: b.turn.ID, Valid: true}) {
			t.Errorf("the room's active turn is %v, want the turn", active)
		}
		if b.claimed == nil || b.claimed.Fence != (journal.Fence{TurnID: b.turn.ID, LeaseToken: token}) {
			t.Errorf("claim %+v, want the fence of token %d", b.claimed, token)
		}
		es := b.written(t)
		if kinds(es) != "turn_started" {
			t.Fatalf("wrote %q, want turn_started", kinds(es))
		}
		var p journal.RecoveredPayload
		if err := json.Unmarshal(es[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		if es[0].Attempt != attempt || p.Attempt != attempt || p.Runner != owner || p.Recovered != recovered {
			t.Errorf("turn_started of attempt %d: %+v; want attempt %d by %s, recovered %v", es[0].Attempt, p, attempt, owner, recovered)
		}
	}
}

// finished: the call ended the turn as outcome for reason, journaled
// wrote, and settled it: the room released, the pending steer rejected,
// the pending approval expired and the approved one kept.
func finished(outcome entturn.State, reason, wrote string) check {
	return func(t *testing.T, b *bundle, before snapshot) {
		t.Helper()
		changedOnly(t, b, before, "lease", "turn", "room", "journal", "commands", "approvals")
		got := b.read(t)
		if got.State != outcome || got.TerminalReason == nil || *got.TerminalReason != reason ||
			got.FinishedAt == nil || got.LeaseExpiresAt != nil || got.Usage == nil {
			t.Errorf("turn %s (%v), finished %v, lease until %v, usage %s; want %s (%s), finished, no lease, usage settled",
				got.State, got.TerminalReason, got.FinishedAt, got.LeaseExpiresAt, got.Usage, outcome, reason)
		}
		if c := b.current(); c != nil && (got.Attempt != c.Turn.Attempt || got.LeaseToken != c.Fence.LeaseToken) {
			t.Errorf("attempt %d, token %d; want the last claim's kept (%d, %d)", got.Attempt, got.LeaseToken, c.Turn.Attempt, c.Fence.LeaseToken)
		}
		if active := b.active(t); active.Valid {
			t.Errorf("the room's active turn is %v, want none", active)
		}
		if s, _ := b.command(t, b.steer); s != "rejected" {
			t.Errorf("the pending steer is %s, want rejected", s)
		}
		if s, _, _ := b.approval(t, b.pending); s != "expired" {
			t.Errorf("the pending approval is %s, want expired", s)
		}
		if s, _, _ := b.approval(t, b.approved); s != "approved" {
			t.Errorf("the approved approval is %s, want it kept", s)
		}
		if got := kinds(b.written(t)); got != wrote {
			t.Errorf("wrote %q, want %q", got, wrote)
		}
		// The run holding the turn, if one did, is fenced from now on.
		if c := b.current(); c != nil {
			if err := b.store.Checkpoint(t.Context(), lease.CheckpointParams{Claim: c, Checkpoint: []byte(`{}`)}); !errors.Is(err, lease.ErrFenced) {
				t.Errorf("a checkpoint of the ended turn's run: %v, want ErrFenced", err)
			}
		}
	}
}

// completed: Terminal published the answer and ended the turn.
func completed(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	finished(entturn.StateCompleted, outcome.ReasonCompleted, "turn_answer steer_rejected turn_terminal")(t, b, before)
	if got := b.read(t); got.Answer == nil || *got.Answer != "the answer" {
		t.Errorf("answer %v, want the run's", got.Answer)
	}
}

// revoked: Revoke ended the turn, without an answer.
func revoked(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	finished(entturn.StateFailed, outcome.ReasonMembershipRevoked, "steer_rejected turn_terminal")(t, b, before)
	if got := b.read(t); got.Answer != nil {
		t.Errorf("answer %q, want none", *got.Answer)
	}
	if b.revoked != 1 {
		t.Errorf("revoked %d turns, want 1", b.revoked)
	}
}

// revokedNone: the author had no unfinished turn to end.
func revokedNone(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	unchanged(t, b, before)
	if b.revoked != 0 {
		t.Errorf("revoked %d turns, want none", b.revoked)
	}
}

// checkpointed: the checkpoint is stored and its entry journaled; the
// lease is as it was.
func checkpointed(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "turn", "journal")
	if !b.holds(t, `checkpoint = '{"step": 1}'::jsonb`) {
		t.Errorf("checkpoint %s, want the run's", b.read(t).Checkpoint)
	}
	if got := kinds(b.written(t)); got != "checkpoint" {
		t.Errorf("wrote %q, want checkpoint", got)
	}
}

// steered: the pending steer is delivered to the run, under its token.
func steered(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "commands", "journal")
	if want := []lease.Steer{{ID: b.steer, Text: steerText}}; !slices.Equal(b.steers, want) {
		t.Errorf("steers %+v, want %+v", b.steers, want)
	}
	if s, token := b.command(t, b.steer); s != "delivered" || token != (sql.NullInt64{Int64: b.run.Fence.LeaseToken, Valid: true}) {
		t.Errorf("the steer is %s under token %v, want delivered under %d", s, token, b.run.Fence.LeaseToken)
	}
	if got := kinds(b.written(t)); got != "steer_delivered" {
		t.Errorf("wrote %q, want steer_delivered", got)
	}
}

// executionClaimed: the approved call's execution is the run's.
func executionClaimed(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "approvals")
	if s, l, r := b.approval(t, b.approved); s != "approved" || l != (sql.NullInt64{Int64: b.run.Fence.LeaseToken, Valid: true}) || r.Valid {
		t.Errorf("the approval is %s, execution lease %v, result %v; want approved, leased to %d, no result", s, l, r, b.run.Fence.LeaseToken)
	}
}

// executionRecorded: the call's result is stored.
func executionRecorded(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "approvals")
	if _, _, r := b.approval(t, b.approved); r != (sql.NullString{String: `{"content": "done"}`, Valid: true}) {
		t.Errorf("result %v, want the run's", r)
	}
	var executed bool
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT executed_at IS NOT NULL FROM approvals WHERE id = $1`, b.approved).Scan(&executed); err != nil {
		t.Fatal(err)
	}
	if !executed {
		t.Error("the approval is not marked executed")
	}
}

// evidenced: the document is the turn's evidence.
func evidenced(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "evidence")
	var n int
	if err := b.env.DB.QueryRowContext(t.Context(), `SELECT count(*) FROM turn_evidence WHERE turn_id = $1 AND document_id = $2`,
		b.turn.ID, b.document).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d evidence rows of the document, want 1", n)
	}
}

// renewed: the lease runs an hour from now, for the same run.
func renewed(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "lease")
	if !b.holds(t, `lease_expires_at > now() + interval '50 minutes'`) {
		t.Errorf("lease until %v, want an hour from now", b.read(t).LeaseExpiresAt)
	}
	got := b.read(t)
	if got.State != entturn.StateRunning || got.LeaseToken != b.run.Fence.LeaseToken || got.LeaseOwner == nil || *got.LeaseOwner != "first-owner" {
		t.Errorf("turn %s, token %d, owner %v; want the run's lease", got.State, got.LeaseToken, got.LeaseOwner)
	}
}

// handedBack: the turn is queued again, its room free, with its token and
// attempt kept (the next claim moves past them) and nothing journaled.
func handedBack(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "lease", "room")
	got := b.read(t)
	if got.State != entturn.StateQueued || got.LeaseOwner != nil || got.LeaseExpiresAt != nil ||
		got.LeaseToken != b.run.Fence.LeaseToken || got.Attempt != b.run.Turn.Attempt {
		t.Errorf("turn %s by %v until %v, token %d, attempt %d; want queued, no lease, token %d, attempt %d",
			got.State, got.LeaseOwner, got.LeaseExpiresAt, got.LeaseToken, got.Attempt, b.run.Fence.LeaseToken, b.run.Turn.Attempt)
	}
	if active := b.active(t); active.Valid {
		t.Errorf("the room's active turn is %v, want none", active)
	}
}

// cancelled: the queued turn ended cancelled, and nothing else moved: the
// caller journals the terminal and settles the command.
func cancelled(t *testing.T, b *bundle, before snapshot) {
	t.Helper()
	changedOnly(t, b, before, "lease", "turn")
	got := b.read(t)
	if got.State != entturn.StateCancelled || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonCancelled ||
		got.FinishedAt == nil || got.Usage == nil || got.LeaseExpiresAt != nil {
		t.Errorf("turn %s (%v), finished %v, usage %s, lease until %v; want cancelled (%s), finished, usage settled, no lease",
			got.State, got.TerminalReason, got.FinishedAt, got.Usage, got.LeaseExpiresAt, outcome.ReasonCancelled)
	}
	if b.gotRoom != b.room {
		t.Errorf("CancelQueued named room %s, want %s", b.gotRoom, b.room)
	}
}

// newRoom is a private room of Alice's for one row: a lane of its own.
func newRoom(t *testing.T, env *testkit.Env) uuid.UUID {
	t.Helper()
	c, err := env.Rooms.Create(t.Context(), env.Alice, room.NewInput{Title: t.Name(), Kind: entconv.KindPrivate})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func documentID(t *testing.T, env *testkit.Env, title string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, title).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
