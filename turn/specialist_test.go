package turn_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/turn"
)

// A one-turn specialist route comes only from the effective roster — the
// agent version's roster ∩ the member's configured one; anything else is
// FORBIDDEN at submit and writes nothing. A permitted route runs the
// specialist's version.
func TestSpecialistRouteOnlyFromTheEffectiveRoster(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	researcher := env.Specialists(t, []string{tools.RetrievalName})
	ctx := context.Background()
	before := len(env.Entries(t, env.Shared.ID))
	for _, tc := range []struct {
		who        authority.Member
		specialist string
	}{
		{env.Alice, "lawyer"},   // in the agent's roster, not in hers
		{env.Alice, "ghost"},    // in neither
		{env.Bob, "researcher"}, // he configured none
	} {
		_, err := env.Turns.Submit(ctx, turn.Submission{Member: tc.who, ConversationID: env.Shared.ID, Text: "hi", IdempotencyKey: uuid.NewString(), Specialist: tc.specialist})
		if codeOf(err) != string(errcode.Forbidden) {
			t.Errorf("%s routing to %q = %v, want FORBIDDEN", tc.who.Email, tc.specialist, err)
		}
	}
	if after := len(env.Entries(t, env.Shared.ID)); after != before {
		t.Fatalf("refused submissions wrote %d entries", after-before)
	}
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "hello", IdempotencyKey: uuid.NewString(), Specialist: "researcher"})
	if err != nil {
		t.Fatal(err)
	}
	if tt.AgentVersionID != researcher.ID {
		t.Fatalf("the turn runs agent version %s, want the researcher's %s", tt.AgentVersionID, researcher.ID)
	}
	var b authority.Bundle
	if err := json.Unmarshal(tt.AuthorityBundle, &b); err != nil || b.Specialist != "researcher" || len(b.Roster) != 1 {
		t.Fatalf("bundle specialist %q roster %v (%v)", b.Specialist, b.Roster, err)
	}
	env.WaitTerminal(t, tt.ID)
	if sys := model.Requests()[0].Messages[0]; sys.Role != "system" || sys.Content != researcher.SystemPrompt {
		t.Fatalf("first message %+v, want the researcher's system prompt", sys)
	}
}
