package testkit

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/ent"
	entagent "github.com/turngate/turngate/ent/agent"
	entagentversion "github.com/turngate/turngate/ent/agentversion"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/tools"
)

// EntriesOf returns the journal entries of kind that turnID wrote in room.
func (e *Env) EntriesOf(t testing.TB, room, turnID uuid.UUID, kind journal.Kind) []journal.Entry {
	t.Helper()
	var out []journal.Entry
	for _, en := range e.Entries(t, room) {
		if en.Kind == kind && en.TurnID.UUID == turnID {
			out = append(out, en)
		}
	}
	return out
}

// Kinds counts the shared room's journal entries of turnID by kind.
func (e *Env) Kinds(t testing.TB, turnID uuid.UUID) map[journal.Kind]int {
	t.Helper()
	n := map[journal.Kind]int{}
	for _, en := range e.Entries(t, e.Shared.ID) {
		if en.TurnID.Valid && en.TurnID.UUID == turnID {
			n[en.Kind]++
		}
	}
	return n
}

// ClaimHead claims a submitted turn directly, as a runner would.
func (e *Env) ClaimHead(t testing.TB, id uuid.UUID, owner string) *lease.Claimed {
	t.Helper()
	c, err := lease.NewStore(e.Client, e.Hub).Claim(context.Background(), lease.ClaimParams{TurnID: id, Owner: owner, TTL: time.Minute})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	return c
}

// StoredSummary is a room's kept summary: the position it covers, the
// number of turns it summarises, and its text.
type StoredSummary struct {
	Through, Turns int64
	Text           string
}

// RoomSummary returns room's kept summary, if it has one.
func (e *Env) RoomSummary(t testing.TB, room uuid.UUID) (StoredSummary, bool) {
	t.Helper()
	var s StoredSummary
	err := e.DB.QueryRow(`SELECT through_position, turns, summary FROM room_summaries WHERE conversation_id = $1`, room).Scan(&s.Through, &s.Turns, &s.Text)
	if err != nil {
		return s, false
	}
	return s, true
}

// CompactionsOf returns the compaction entries turnID wrote in room.
func (e *Env) CompactionsOf(t testing.TB, room, turnID uuid.UUID) []journal.CompactionPayload {
	t.Helper()
	var out []journal.CompactionPayload
	for _, en := range e.EntriesOf(t, room, turnID, journal.KindCompaction) {
		var p journal.CompactionPayload
		if err := json.Unmarshal(en.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// Specialists gives the demo rooms' agent a roster of two specialists and
// alice a configured roster of one: her effective roster is [researcher].
func (e *Env) Specialists(t testing.TB, rootTools []string) (researcher *ent.AgentVersion) {
	t.Helper()
	ctx := context.Background()
	// The demo seeds the researcher and alice's roster [researcher]; the
	// lawyer is in the agent's roster only.
	a, err := e.Client.Agent.Create().SetSlug("lawyer").SetName("lawyer").Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.AgentVersion.Create().SetAgentID(a.ID).SetVersion(1).SetController("react").SetModelRoute("builtin").
		SetSystemPrompt("You are the lawyer.").SetTools([]string{tools.RetrievalName}).Save(ctx); err != nil {
		t.Fatal(err)
	}
	researcher, err = e.Client.AgentVersion.Query().Where(entagentversion.HasAgentWith(entagent.Slug(demo.Researcher))).Only(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root := e.Agent(t, "react", rootTools, nil)
	if _, err := e.DB.Exec(`UPDATE agent_versions SET specialists = '["researcher","lawyer"]' WHERE id = $1`, root.ID); err == nil {
		t.Fatal("agent versions must be immutable")
	}
	if _, err := e.Client.AgentVersion.Create().SetAgentID(root.AgentID).SetVersion(root.Version + 1).SetController("react").
		SetModelRoute("builtin").SetSystemPrompt(root.SystemPrompt).SetTools(rootTools).SetSpecialists([]string{"researcher", "lawyer"}).Save(ctx); err != nil {
		t.Fatal(err)
	}
	return researcher
}

// UsageOf is the usage settled on an ended turn; it fails the test when
// the turn has none.
func UsageOf(t testing.TB, tt *ent.Turn) outcome.Usage {
	t.Helper()
	if len(tt.Usage) == 0 {
		t.Fatalf("turn %s (%s) has no settled usage", tt.ID, tt.State)
	}
	var u outcome.Usage
	if err := json.Unmarshal(tt.Usage, &u); err != nil {
		t.Fatal(err)
	}
	return u
}
