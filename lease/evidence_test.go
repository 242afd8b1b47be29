package lease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/resource"
)

// AddEvidence at its seam, from each starting state: the run holding the
// turn records documents, and the evidence of the turns that made the
// artifacts it names; the same call again adds nothing (evidence only
// grows, once per document); a stale lease token and an ended turn are
// ErrFenced and write nothing.
func TestAddEvidence(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	store := lease.NewStore(env.Client, env.Hub)
	doc := func(title string) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, title).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	launch, bands, policy := doc("Launch plan"), doc("Compensation bands 2027"), doc("Security policy")
	claim := func(m authority.Member, room uuid.UUID) *lease.Claimed {
		t.Helper()
		tt := env.Submit(t, m, room, "a question")
		c, err := store.Claim(ctx, lease.ClaimParams{TurnID: tt.ID, Owner: "test", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	evidence := func(c *lease.Claimed) []uuid.UUID {
		t.Helper()
		ids, err := env.DB.Query(`SELECT document_id FROM turn_evidence WHERE conversation_id = $1 AND turn_id = $2 ORDER BY document_id`,
			c.Turn.ConversationID, c.Turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer ids.Close()
		var out []uuid.UUID
		for ids.Next() {
			var id uuid.UUID
			if err := ids.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}

	// A file made in another room's turn that drew on the bands.
	maker := claim(env.Alice, env.Private(t, env.Alice).ID)
	if err := store.AddEvidence(ctx, lease.EvidenceParams{Claim: maker, Documents: []uuid.UUID{bands}}); err != nil {
		t.Fatal(err)
	}
	file, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, maker.Turn.ID, "bands.md", "", []byte("bands"))
	if err != nil {
		t.Fatal(err)
	}

	run := claim(env.Alice, env.Shared.ID)
	stale := *run
	stale.Fence.LeaseToken--
	sorted := func(ids ...uuid.UUID) []uuid.UUID {
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		return ids
	}
	for _, tt := range []struct {
		name    string
		before  func()
		params  lease.EvidenceParams
		wantErr error
		want    []uuid.UUID
	}{
		{name: "the run holding the turn",
			params: lease.EvidenceParams{Claim: run, Documents: []uuid.UUID{launch}, Artifacts: []uuid.UUID{file.ID}},
			want:   sorted(launch, bands)},
		{name: "the same again adds nothing",
			params: lease.EvidenceParams{Claim: run, Documents: []uuid.UUID{launch, launch}, Artifacts: []uuid.UUID{file.ID}},
			want:   sorted(launch, bands)},
		{name: "a stale lease token",
			params:  lease.EvidenceParams{Claim: &stale, Documents: []uuid.UUID{policy}},
			wantErr: lease.ErrFenced, want: sorted(launch, bands)},
		{name: "an ended turn",
			before: func() {
				if err := store.Terminal(ctx, lease.TerminalParams{Fence: run.Fence, State: entturn.StateFailed, Reason: outcome.ReasonRuntimeFailed}); err != nil {
					t.Fatal(err)
				}
			},
			params:  lease.EvidenceParams{Claim: run, Documents: []uuid.UUID{policy}},
			wantErr: lease.ErrFenced, want: sorted(launch, bands)},
	} {
		if tt.before != nil {
			tt.before()
		}
		if err := store.AddEvidence(ctx, tt.params); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: AddEvidence = %v, want %v", tt.name, err, tt.wantErr)
		}
		if got := evidence(run); !slices.Equal(got, tt.want) {
			t.Errorf("%s: evidence %v, want %v", tt.name, got, tt.want)
		}
	}
}
