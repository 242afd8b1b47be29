package turn_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/turn"
)

// receiver is a webhook endpoint that counts deliveries.
type receiver struct {
	mu   sync.Mutex
	keys []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) deliveries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// webhookWorld is a room whose agent proposes one webhook and then
// answers.
func webhookWorld(t *testing.T, timeout time.Duration) (*testkit.Env, *receiver) {
	t.Helper()
	env := testkit.New(t)
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	env.Agent(t, "react", []string{tools.SendWebhookName}, nil)
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n == 1 {
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
				{ID: "call_1", Name: tools.SendWebhookName, Arguments: `{"endpoint":"ops","payload":{"deploy":"v2"}}`}}}, nil
		}
		return &gateway.Result{Text: "Done.", FinishReason: "stop"}, nil
	}}
	env.Runner(t, runner.Config{
		Gateway:         model.Gateway(),
		Tools:           tools.NewRegistry(tools.SendWebhook{Endpoints: map[string]string{"ops": srv.URL}}),
		ApprovalTimeout: timeout,
	})
	return env, rec
}

func approvalOf(t *testing.T, env *testkit.Env, turnID uuid.UUID) uuid.UUID {
	t.Helper()
	env.WaitTurn(t, turnID, func(*ent.Turn) bool {
		return len(env.EntriesOf(t, env.Shared.ID, turnID, journal.KindApprovalRequested)) == 1
	})
	var p journal.ApprovalRequestedPayload
	if err := json.Unmarshal(env.EntriesOf(t, env.Shared.ID, turnID, journal.KindApprovalRequested)[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.ApprovalID
}

// The assistant proposes; only the turn's author (or the shared room's
// owner) decides. Approved, the effect is executed exactly once, keyed by
// the approval's id; the decision converges on retry and cannot be
// changed.
func TestApprovedEffectRunsOnceAfterTheAuthorDecides(t *testing.T) {
	t.Parallel()
	env, rec := webhookWorld(t, time.Minute)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "tell ops to deploy v2")
	id := approvalOf(t, env, tt.ID)
	mallory := env.NewMember(t, "mallory@example.com")
	// A member who may see the approval but not decide it is FORBIDDEN;
	// to a non-member it does not exist.
	for who, want := range map[authority.Member]errcode.Code{mallory: errcode.NotFound, env.Bob: errcode.Forbidden} {
		if _, err := env.Turns.DecideApproval(ctx, who, id, turn.DecisionApprove); codeOf(err) != string(want) {
			t.Fatalf("%s deciding = %v, want %s", who.Email, err, want)
		}
	}
	if n := len(rec.deliveries()); n != 0 {
		t.Fatalf("%d deliveries before any decision", n)
	}
	if _, err := env.Turns.DecideApproval(ctx, env.Alice, id, turn.DecisionApprove); err != nil {
		t.Fatal(err)
	}
	if done := env.WaitTerminal(t, tt.ID); done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	if got := rec.deliveries(); len(got) != 1 || got[0] != id.String() {
		t.Fatalf("deliveries %v, want one keyed by the approval %s", got, id)
	}
	if a, err := env.Turns.DecideApproval(ctx, env.Alice, id, turn.DecisionApprove); err != nil || !a.Executed {
		t.Fatalf("retrying the decision = %+v, %v; want it to converge", a, err)
	}
	if _, err := env.Turns.DecideApproval(ctx, env.Alice, id, turn.DecisionReject); codeOf(err) != string(errcode.Conflict) {
		t.Fatalf("changing the decision = %v, want CONFLICT", err)
	}
	if n := len(env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindApprovalDecided)); n != 1 {
		t.Fatalf("%d approval_decided entries, want 1", n)
	}
}

// Rejected or expired, the effect never happens and the model is told.
func TestRejectedOrExpiredEffectNeverRuns(t *testing.T) {
	t.Parallel()
	t.Run("rejected", func(t *testing.T) {
		t.Parallel()
		env, rec := webhookWorld(t, time.Minute)
		// Bob may send webhooks; his proposal is decided by the room's owner.
		if _, err := env.DB.Exec(`INSERT INTO member_permissions (id, member_id, permission) VALUES ($1, $2, 'tasks.write')`, uuid.New(), env.Bob.ID); err != nil {
			t.Fatal(err)
		}
		tt := env.Submit(t, env.Bob, env.Shared.ID, "tell ops to deploy v2")
		id := approvalOf(t, env, tt.ID)
		// The shared room's owner decides another member's proposal too.
		if _, err := env.Turns.DecideApproval(context.Background(), env.Alice, id, turn.DecisionReject); err != nil {
			t.Fatal(err)
		}
		env.WaitTerminal(t, tt.ID)
		assertToolStatus(t, env, tt.ID, callback.ToolRejected)
		if n := len(rec.deliveries()); n != 0 {
			t.Fatalf("%d deliveries after a rejection", n)
		}
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		env, rec := webhookWorld(t, 300*time.Millisecond)
		tt := env.Submit(t, env.Alice, env.Shared.ID, "tell ops to deploy v2")
		id := approvalOf(t, env, tt.ID)
		env.WaitTerminal(t, tt.ID)
		assertToolStatus(t, env, tt.ID, callback.ToolExpired)
		if n := len(rec.deliveries()); n != 0 {
			t.Fatalf("%d deliveries after expiry", n)
		}
		if _, err := env.Turns.DecideApproval(context.Background(), env.Alice, id, turn.DecisionApprove); codeOf(err) != string(errcode.Conflict) {
			t.Fatalf("approving an expired approval = %v, want CONFLICT", err)
		}
	})
}

func assertToolStatus(t *testing.T, env *testkit.Env, turnID uuid.UUID, want string) {
	t.Helper()
	completed := env.EntriesOf(t, env.Shared.ID, turnID, journal.KindToolCompleted)
	var p journal.ToolCompletedPayload
	if len(completed) != 1 || json.Unmarshal(completed[0].Payload, &p) != nil || p.Status != want {
		t.Fatalf("tool_completed %+v, want status %s", p, want)
	}
}

// An author who has left the room can no longer decide their turn's
// approval: the decision is guarded by membership at the moment it lands,
// and to a non-member the approval does not exist (NOT_FOUND). The
// removal ended the turn, so the approval is expired with it.
func TestRemovedAuthorCannotDecide(t *testing.T) {
	t.Parallel()
	env, rec := webhookWorld(t, time.Minute)
	ctx := context.Background()
	carol := env.NewMember(t, "carol@example.com")
	if _, err := env.Rooms.AddMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(`INSERT INTO member_permissions (id, member_id, permission) VALUES ($1, $2, 'tasks.write')`, uuid.New(), carol.ID); err != nil {
		t.Fatal(err)
	}
	tt := env.Submit(t, carol, env.Shared.ID, "tell ops to deploy v2")
	id := approvalOf(t, env, tt.ID)
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Turns.DecideApproval(ctx, carol, id, turn.DecisionApprove); codeOf(err) != string(errcode.NotFound) {
		t.Fatalf("a removed author deciding = %v, want NOT_FOUND", err)
	}
	var state string
	if err := env.DB.QueryRow(`SELECT state FROM approvals WHERE id = $1`, id).Scan(&state); err != nil || state != "expired" {
		t.Fatalf("approval is %s (%v), want expired with its turn", state, err)
	}
	if n := len(rec.deliveries()); n != 0 {
		t.Fatalf("%d deliveries", n)
	}
}

// bodyReceiver is a webhook endpoint that keeps each body it receives.
type bodyReceiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *bodyReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *bodyReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// What leaves the server is redacted as the journal is: a webhook payload
// the model filled with an email and a key is stored with its approval
// redacted, the approver is shown those exact bytes, and those bytes, no
// others, are what the endpoint receives.
func TestWebhookPayloadIsRedactedBeforeItLeaves(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	rec := &bodyReceiver{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	env.Agent(t, "react", []string{tools.SendWebhookName}, nil)
	secretKey := "sk-" + strings.Repeat("q7", 12)
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n == 1 {
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: tools.SendWebhookName,
				Arguments: `{"endpoint":"ops","payload":{"contact":"carol.vendor@example.org","key":"` + secretKey + `","note":["use ` + secretKey + `"]}}`}}}, nil
		}
		return &gateway.Result{Text: "Done.", FinishReason: "stop"}, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway(), ApprovalTimeout: time.Minute,
		Tools: tools.NewRegistry(tools.SendWebhook{Endpoints: map[string]string{"ops": srv.URL}})})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "tell the vendor")
	id := approvalOf(t, env, tt.ID)
	shown, err := env.Turns.DecideApproval(context.Background(), env.Alice, id, turn.DecisionApprove)
	if err != nil {
		t.Fatal(err)
	}
	if done := env.WaitTerminal(t, tt.ID); done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	got := rec.received()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	if strings.Contains(got[0], secretKey) || strings.Contains(got[0], "carol.vendor@example.org") {
		t.Fatalf("the endpoint received the secrets: %s", got[0])
	}
	var args struct {
		Payload any `json:"payload"`
	}
	var sent any
	if err := json.Unmarshal(shown.Arguments, &args); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got[0]), &sent); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(args.Payload, sent) {
		t.Fatalf("the approver was shown %s; the endpoint received %s", shown.Arguments, got[0])
	}
}
