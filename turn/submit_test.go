package turn_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/turn"
)

// TestSubmitIdempotencyRace: 50 concurrent submissions with one key make
// one turn, one turn_accepted, one answer and one terminal.
func TestSubmitIdempotencyRace(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	sub := turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "hello, once", IdempotencyKey: "race-key-1"}

	const n = 50
	ids := make([]uuid.UUID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tt, err := env.Turns.Submit(ctx, sub)
			errs[i] = err
			if err == nil {
				ids[i] = tt.ID
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("submission %d got turn %s, submission 0 got %s", i, ids[i], ids[0])
		}
	}

	env.Runner(t, runner.Config{})
	final := env.WaitTerminal(t, ids[0])
	if final.State != "completed" {
		t.Fatalf("turn state = %s, want completed", final.State)
	}
	var turns, accepted, answers, terminals int
	if err := env.DB.QueryRow(`SELECT count(*) FROM turns WHERE idempotency_key = 'race-key-1'`).Scan(&turns); err != nil {
		t.Fatal(err)
	}
	for _, e := range env.Entries(t, env.Shared.ID) {
		if !e.TurnID.Valid || e.TurnID.UUID != ids[0] {
			continue
		}
		switch e.Kind {
		case journal.KindTurnAccepted:
			accepted++
		case journal.KindTurnAnswer:
			answers++
		case journal.KindTurnTerminal:
			terminals++
		}
	}
	if turns != 1 || accepted != 1 || answers != 1 || terminals != 1 {
		t.Fatalf("turns=%d accepted=%d answers=%d terminals=%d, want 1 each", turns, accepted, answers, terminals)
	}
}

func TestSubmitRejectsAndWritesNothing(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	first := env.Submit(t, env.Alice, env.Shared.ID, "first")
	mallory := env.NewMember(t, "mallory@example.com")

	tests := []struct {
		name string
		sub  turn.Submission
		code errcode.Code
	}{
		{"same key, other text", turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "not first", IdempotencyKey: first.IdempotencyKey}, errcode.Conflict},
		{"not a member", turn.Submission{Member: mallory, ConversationID: env.Shared.ID, Text: "let me in", IdempotencyKey: "k-mallory"}, errcode.NotFound},
		{"no such room", turn.Submission{Member: env.Alice, ConversationID: uuid.New(), Text: "anyone?", IdempotencyKey: "k-nowhere"}, errcode.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(t, env)
			_, err := env.Turns.Submit(ctx, tt.sub)
			e, ok := errcode.From(err)
			if !ok || e.Code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
			if after := snapshot(t, env); after != before {
				t.Fatalf("database changed: before %+v, after %+v", before, after)
			}
		})
	}

	// The same key with the same text is the same turn, and writes nothing.
	before := snapshot(t, env)
	again, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "first", IdempotencyKey: first.IdempotencyKey})
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry = %v, %v; want turn %s", again, err, first.ID)
	}
	if after := snapshot(t, env); after != before {
		t.Fatalf("retry changed the database: before %+v, after %+v", before, after)
	}
}

type counts struct{ Turns, Entries, Head int64 }

func snapshot(t *testing.T, env *testkit.Env) counts {
	t.Helper()
	var c counts
	err := env.DB.QueryRow(`SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM journal_entries),
		(SELECT COALESCE(sum(next_seq), 0) FROM conversations)`).Scan(&c.Turns, &c.Entries, &c.Head)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIdempotencyKeyCoversWholeInput: a key names one whole input — its
// text, selected documents and artifacts, and specialist route. A retry
// with the same input (the selections in any order, repeated ids once) is
// the same turn; the same key with the same text but any other field is a
// CONFLICT that writes nothing.
func TestIdempotencyKeyCoversWholeInput(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	doc := func(title string) uuid.UUID {
		id, err := resource.AddDocument(ctx, env.Client, resource.Document{Title: title, Body: title + " body", Readers: []string{env.Alice.Email}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	d1, d2 := doc("one"), doc("two")
	art, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, uuid.Nil, "in.txt", "", []byte("input"))
	if err != nil {
		t.Fatal(err)
	}
	sub := func(docs, arts []uuid.UUID) turn.Submission {
		return turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "same text", IdempotencyKey: "whole-input",
			Documents: docs, Artifacts: arts}
	}
	first, err := env.Turns.Submit(ctx, sub([]uuid.UUID{d1, d2}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, same := range [][]uuid.UUID{{d1, d2}, {d2, d1}, {d1, d2, d1}} {
		again, err := env.Turns.Submit(ctx, sub(same, nil))
		if err != nil || again.ID != first.ID {
			t.Errorf("documents %v: %v, %v; want turn %s", same, again, err, first.ID)
		}
	}
	for name, other := range map[string]turn.Submission{
		"other documents":    sub([]uuid.UUID{d1}, nil),
		"no documents":       sub(nil, nil),
		"an artifact added":  sub([]uuid.UUID{d1, d2}, []uuid.UUID{art.ID}),
		"a specialist route": func() turn.Submission { s := sub([]uuid.UUID{d1, d2}, nil); s.Specialist = "researcher"; return s }(),
	} {
		before := snapshot(t, env)
		_, err := env.Turns.Submit(ctx, other)
		if e, ok := errcode.From(err); !ok || e.Code != errcode.Conflict {
			t.Errorf("%s: err = %v, want CONFLICT", name, err)
		}
		if after := snapshot(t, env); after != before {
			t.Errorf("%s changed the database: before %+v, after %+v", name, before, after)
		}
	}
}

// TestSubmitRetrySurvivesDeadlockWithClaim forces the one lock-order
// inversion acceptance has. A retry's first statement takes the room's
// row and looks its key up; the key's turn commits just after that look
// (here: copied into place, as the original's acceptance would have made
// it), and a claim locks that turn and waits for the room's row. The
// retry's insert then waits on the claim's turn: a deadlock, which
// Postgres breaks by aborting the retry (its deadlock_timeout is the
// shorter). Submit runs the attempt again and converges on the turn — the
// client never sees the deadlock — and the claim goes through.
func TestSubmitRetrySurvivesDeadlockWithClaim(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "deadlock me", IdempotencyKey: "deadlock-1"}
	template, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: sub.Text, IdempotencyKey: "template"})
	if err != nil {
		t.Fatal(err)
	}
	original := uuid.New()
	claimed := make(chan error, 1)
	var attempts int
	after := func() {
		if attempts++; attempts > 1 {
			return // the attempt after the deadlock runs plainly
		}
		// The original, committed now: after the retry's look-up.
		if _, err := env.DB.ExecContext(ctx, `INSERT INTO turns
SELECT (jsonb_populate_record(NULL::turns, to_jsonb(t) || jsonb_build_object('id', $1::uuid, 'idempotency_key', $2::text))).*
FROM turns t WHERE t.id = $3`, original, sub.IdempotencyKey, template.ID); err != nil {
			t.Errorf("the original: %v", err)
			return
		}
		// The claim takes the original's row first, with a long
		// deadlock_timeout, then queues for the room's row the retry holds.
		claim, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Error(err)
			return
		}
		var pid int
		for _, q := range []string{`SET LOCAL deadlock_timeout = '20s'`, `UPDATE turns SET lease_owner = 'claimer' WHERE id = '` + original.String() + `'`} {
			if _, err := claim.ExecContext(ctx, q); err != nil {
				t.Error(err)
				return
			}
		}
		if err := claim.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Error(err)
			return
		}
		go func() {
			_, err := claim.ExecContext(ctx, `UPDATE conversations SET active_turn_id = $2 WHERE id = $1`, env.Shared.ID, original)
			if err == nil {
				err = claim.Commit()
			} else {
				claim.Rollback()
			}
			claimed <- err
		}()
		for waiting := false; !waiting; {
			if err := env.DB.QueryRowContext(ctx, `SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
				t.Errorf("the claim's wait: %v", err)
				return
			}
		}
	}
	var rolledBack []error
	turn.SetTakeHooks(env.Turns, after, func(err error) { rolledBack = append(rolledBack, err) })
	got, err := env.Turns.Submit(ctx, sub)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got.ID != original {
		t.Fatalf("retry got turn %s, want the original %s", got.ID, original)
	}
	if len(rolledBack) != 1 || !strings.Contains(rolledBack[0].Error(), "40P01") {
		t.Fatalf("attempts rolled back: %v; want the one deadlock", rolledBack)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim: %v", err)
	}
	var turns int
	if err := env.DB.QueryRow(`SELECT count(*) FROM turns WHERE idempotency_key = 'deadlock-1'`).Scan(&turns); err != nil || turns != 1 {
		t.Fatalf("turns with the key: %d, %v; want 1", turns, err)
	}
}
