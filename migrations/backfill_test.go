package migrations_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
)

// TestEvidenceBackfill: a turn that ran before turn_evidence existed gets
// as evidence what its journal says it read — the documents its tools
// returned and its answer cites — once, however often the backfill runs.
func TestEvidenceBackfill(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	doc := func(title string) uuid.UUID {
		var id uuid.UUID
		if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, title).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	bands, launch := doc("Compensation bands 2027"), doc("Launch plan")
	room := env.Private(t, env.Alice).ID
	tt := env.Submit(t, env.Alice, room, "What do we know?")
	id := uuid.NullUUID{UUID: tt.ID, Valid: true}
	if _, err := journal.Append(ctx, env.DB, room, nil,
		journal.Draft{Kind: journal.KindToolCompleted, TurnID: id, Attempt: 1, Payload: journal.ToolCompletedPayload{
			CallID: "c1", Name: "retrieval", Status: "ok", Citations: []string{"doc:" + bands.String() + "#p0", "turn:" + uuid.NewString()}}},
		journal.Draft{Kind: journal.KindTurnAnswer, TurnID: id, Attempt: 1, Payload: journal.AnswerPayload{Text: "…",
			Citations: []journal.AnswerCitation{{ID: "doc:" + launch.String() + "#p1", Document: launch}}}},
	); err != nil {
		t.Fatal(err)
	}
	backfill, err := os.ReadFile("20261204160013_evidence_backfill.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := env.DB.Exec(string(backfill)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := env.DB.Query(`SELECT document_id FROM turn_evidence WHERE turn_id = $1`, tt.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []uuid.UUID
	for rows.Next() {
		var d uuid.UUID
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if len(got) != 2 || !slices.Contains(got, bands) || !slices.Contains(got, launch) {
		t.Fatalf("backfilled evidence %v; want the bands %s and the launch plan %s, once each", got, bands, launch)
	}
}
