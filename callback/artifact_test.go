package callback_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
)

// makesAFile has the model create one artifact, then answer.
func makesAFile(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role != "tool" && len(req.Tools) > 0 {
		return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
			{ID: "call_1", Name: tools.CreateArtifactName, Arguments: `{"name":"notes.md","content":"# notes"}`}}}, nil
	}
	return &gateway.Result{Text: "I wrote notes.md.", FinishReason: "stop"}, nil
}

// In a collaborative turn the file a tool made stays its owner's record,
// and the room gets an immutable reference to it, which the answer
// carries; another member reads it through that reference. In a private
// room the answer carries the owner's own artifact and no reference.
func TestArtifactsSettleAsRoomReferences(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.CreateArtifactName}, nil)
	env.Runner(t, runner.Config{Gateway: (&testkit.ScriptModel{Script: makesAFile}).Gateway()})
	ctx := context.Background()
	answerArtifacts := func(room, turnID uuid.UUID) []journal.AnswerArtifact {
		t.Helper()
		var p journal.AnswerPayload
		if err := json.Unmarshal(env.EntriesOf(t, room, turnID, journal.KindTurnAnswer)[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Artifacts
	}

	shared := env.Submit(t, env.Alice, env.Shared.ID, "write notes")
	env.WaitTerminal(t, shared.ID)
	got := answerArtifacts(env.Shared.ID, shared.ID)
	if len(got) != 1 || got[0].ResourceID == uuid.Nil || got[0].Name != "notes.md" {
		t.Fatalf("shared answer artifacts %+v, want one room reference", got)
	}
	var owner, room uuid.UUID
	var digest string
	if err := env.DB.QueryRow(`SELECT a.owner_id, r.conversation_id, r.digest FROM room_resources r JOIN artifacts a ON a.id = r.artifact_id WHERE r.id = $1`,
		got[0].ResourceID).Scan(&owner, &room, &digest); err != nil {
		t.Fatal(err)
	}
	if owner != env.Alice.ID || room != env.Shared.ID || digest != got[0].SHA256 {
		t.Fatalf("reference: owner %s room %s digest %s", owner, room, digest)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, got[0].ArtifactID); err != nil {
		t.Fatalf("another member reads through the reference: %v", err)
	}

	private := env.Submit(t, env.Alice, env.Private(t, env.Alice).ID, "write notes")
	env.WaitTerminal(t, private.ID)
	mine := answerArtifacts(env.Private(t, env.Alice).ID, private.ID)
	if len(mine) != 1 || mine[0].ResourceID != uuid.Nil {
		t.Fatalf("private answer artifacts %+v, want the owner's artifact, no reference", mine)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, mine[0].ArtifactID); !errors.Is(err, resource.ErrArtifactNotFound) {
		t.Fatalf("bob reads alice's private file: %v", err)
	}
}
