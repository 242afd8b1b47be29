package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/sandbox"
	"github.com/turngate/turngate/tools"
)

// Each tool that returns document content says what it derives from
// (Result.Documents), for the backend to record as the turn's evidence:
// retrieval and read_document the documents they return; history_search
// the evidence of the turns it finds; run_code the evidence of the turns
// that made the files it reads. In a shared room, run_code reads no file
// drawn from what a member of the room may not read — a member who joined
// later included — exactly as if it did not exist.
func TestToolResultsSayWhatTheyDeriveFrom(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	rc := newRunCode(t, sandbox.PoolConfig{Workers: 1})
	var bands uuid.UUID
	if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = 'Compensation bands 2027'`).Scan(&bands); err != nil {
		t.Fatal(err)
	}
	managers, err := env.Rooms.Create(ctx, env.Alice, room.NewInput{Title: "Managers", Kind: entconv.KindShared})
	if err != nil {
		t.Fatal(err)
	}
	// A finished turn of alice's, alone in the room, that drew on the
	// bands (as its run would have recorded), and the file it made.
	asked := env.Submit(t, env.Alice, managers.ID, "What are the engineering bands for 2027?")
	if _, err := env.DB.Exec(`UPDATE turns SET state = 'completed', answer = 'E3 from 95,000 EUR' WHERE id = $1`, asked.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(`INSERT INTO turn_evidence (id, conversation_id, turn_id, document_id) VALUES ($1, $2, $3, $4)`,
		uuid.New(), managers.ID, asked.ID, bands); err != nil {
		t.Fatal(err)
	}
	file, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, asked.ID, "bands.txt", "", []byte("E3 from 95,000 EUR"))
	if err != nil {
		t.Fatal(err)
	}

	private := env.Private(t, env.Alice).ID
	alice := func(room uuid.UUID, shared bool) tools.Actor {
		return tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: room, TurnID: uuid.New(), Shared: shared,
			Manifest: authority.Manifest{Artifacts: []uuid.UUID{file.ID}}}
	}
	call := func(tool tools.Tool, actor tools.Actor, args any) (tools.Result, error) {
		t.Helper()
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: raw})
	}
	derives := func(name string, res tools.Result, err error, want ...uuid.UUID) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(res.Documents, want) {
			t.Errorf("%s: derives from %v, want %v (content %.120q)", name, res.Documents, want, res.Content)
		}
	}
	res, err := call(tools.Retrieval{}, alice(private, false), map[string]any{"query": "engineering bands"})
	derives("retrieval", res, err, bands)
	res, err = call(tools.ReadDocument{}, alice(private, false), map[string]any{"id": bands.String()})
	derives("read_document", res, err, bands)
	res, err = call(tools.HistorySearch{}, alice(private, false), map[string]any{"query": "engineering bands"})
	derives("history_search", res, err, bands)
	res, err = call(rc, alice(private, false), map[string]any{"script": `print(read_input("bands.txt"))`})
	derives("run_code reading the file", res, err, bands)
	res, err = call(rc, alice(managers.ID, true), map[string]any{"script": `print(read_input("bands.txt"))`})
	derives("run_code in the room alice is alone in", res, err, bands)

	if _, err := env.Rooms.AddMember(ctx, env.Alice, managers.ID.String(), env.Bob.Email); err != nil {
		t.Fatal(err)
	}
	var refusal *tools.Refusal
	res, err = call(rc, alice(managers.ID, true), map[string]any{"script": `print(read_input("bands.txt"))`})
	if !errors.As(err, &refusal) || refusal.Status != "script_error" || strings.Contains(refusal.Message, "95,000") || len(res.Documents) > 0 {
		t.Errorf("run_code in the room bob joined read the bands file: %+v, %v", res, err)
	}
	res, err = call(rc, alice(private, false), map[string]any{"script": `print(read_input("bands.txt"))`})
	derives("run_code in alice's private room, after", res, err, bands)
}
