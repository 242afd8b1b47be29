package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// approvalModel is an OpenAI-compatible Chat Completions endpoint speaking
// the real streaming wire format. Its first request is answered with a
// send_webhook tool call; every later one with a short text answer. It
// keeps every request body.
type approvalModel struct{ modelRequests }

func (f *approvalModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, n, ok := f.record(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"local-model\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		w.(http.Flusher).Flush()
	}
	if n == 1 {
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"send_webhook","arguments":""}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"endpoint\":\"ops\","}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"payload\":{\"deploy\":\"v2\"}}"}}]}`, "null")
		chunk(`{}`, `"tool_calls"`)
	} else {
		chunk(`{"role":"assistant","content":"Ops was told "}`, "null")
		chunk(`{"content":"to deploy v2."}`, "null")
		chunk(`{}`, `"stop"`)
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"local-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":6,\"total_tokens\":46}}\n\ndata: [DONE]\n\n")
}

func (f *approvalModel) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// approvalDelivery is one POST a webhook receiver got.
type approvalDelivery struct {
	Key  string
	Body string
}

// approvalReceiver is the ops webhook endpoint: it records every POST.
type approvalReceiver struct {
	mu  sync.Mutex
	got []approvalDelivery
}

func (r *approvalReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	if req.Method == http.MethodPost {
		r.got = append(r.got, approvalDelivery{Key: req.Header.Get("Idempotency-Key"), Body: string(body)})
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *approvalReceiver) deliveries() []approvalDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]approvalDelivery(nil), r.got...)
}

const decideApprovalMutation = `mutation($id: ID!, $d: ApprovalDecision!) {
  decideApproval(input: {approvalId: $id, decision: $d}) { id turnId tool arguments state expiresAt executed }
}`

// approvalView is an Approval as the tests select it.
type approvalView struct {
	ID        string          `json:"id"`
	TurnID    string          `json:"turnId"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	State     string          `json:"state"`
	ExpiresAt time.Time       `json:"expiresAt"`
	Executed  bool            `json:"executed"`
}

// decideAs runs decideApproval as c.
func decideAs(ctx context.Context, c *gqlclient.Client, id, decision string) (approvalView, error) {
	var out struct {
		DecideApproval approvalView `json:"decideApproval"`
	}
	err := c.Do(ctx, decideApprovalMutation, map[string]any{"id": id, "d": decision}, &out)
	return out.DecideApproval, err
}

// approvalsOf reads a turn's approvals and state as c.
func approvalsOf(t *testing.T, ctx context.Context, c *gqlclient.Client, turnID string) (string, []approvalView) {
	t.Helper()
	var out struct {
		Turn *struct {
			State     string         `json:"state"`
			Approvals []approvalView `json:"approvals"`
		} `json:"turn"`
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state approvals { id turnId tool arguments state expiresAt executed } } }`,
		map[string]any{"id": turnID}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Turn == nil {
		t.Fatalf("turn %s is not visible", turnID)
	}
	return out.Turn.State, out.Turn.Approvals
}

// approvalEntry is a journal entry as the approval test reads it.
type approvalEntry struct {
	Seq     int64           `json:"seq"`
	Kind    string          `json:"kind"`
	TurnID  *string         `json:"turnId"`
	ActorID *string         `json:"actorId"`
	Payload json.RawMessage `json:"payload"`
}

// TestApprovalDecidedThroughTheServer: a real turn on the openai route,
// whose model (a local OpenAI-compatible endpoint) proposes send_webhook
// to the configured ops endpoint. The proposal reaches the room's journal
// subscription as APPROVAL_REQUESTED, and nothing is sent while it is
// pending. Bob (a member, neither the author nor the room's owner) is
// FORBIDDEN to decide; to mallory (not a member) it is NOT_FOUND, like an
// unknown approval; malformed input is BAD_USER_INPUT — none of which decides
// anything. Alice (the author and the Team room's owner) approves: the
// receiver gets exactly one POST, keyed by the approval's id, the turn
// completes, and Turn.approvals shows it APPROVED and executed. Retrying
// the approval converges; rejecting it now is a CONFLICT.
func TestApprovalDecidedThroughTheServer(t *testing.T) {
	t.Parallel()
	rec := &approvalReceiver{}
	hook := httptest.NewServer(rec)
	defer hook.Close()
	model := &approvalModel{}
	llm := httptest.NewServer(model)
	defer llm.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: llm.URL, APIKey: "sk-local", Model: "local-model"}
		c.AgentRoute = "openai"
		c.Webhooks = map[string]string{"ops": hook.URL}
		c.ApprovalTimeout = 5 * time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b, m := h.Client(t, alice), h.Client(t, bob), h.Client(t, mallory)
	aliceID := memberID(t, a)
	team := servertest.Rooms(t, a)["Team room"]

	conn := h.Dial(t, ctx, a)
	defer conn.Close()
	msgs, err := conn.Subscribe(ctx, "approvals", gqlclient.Request{
		Query:     `subscription($c: ID!, $after: Int) { journal(conversationId: $c, after: $after) { seq kind turnId actorId payload } }`,
		Variables: map[string]any{"c": team.ID, "after": team.Head},
	})
	if err != nil {
		t.Fatal(err)
	}

	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "Tell ops to deploy v2.", "approval-1")
	var requested struct {
		ApprovalID string    `json:"approvalId"`
		Tool       string    `json:"tool"`
		Arguments  string    `json:"arguments"`
		ExpiresAt  time.Time `json:"expiresAt"`
	}
	var seen []approvalEntry
	for {
		e := servertest.NextJournal[approvalEntry](t, ctx, msgs)
		seen = append(seen, e)
		if e.TurnID == nil || *e.TurnID != turnID {
			continue
		}
		if e.Kind == "TURN_TERMINAL" {
			t.Fatalf("the turn ended before asking for an approval: %+v", seen)
		}
		if e.Kind == "APPROVAL_REQUESTED" {
			if err := json.Unmarshal(e.Payload, &requested); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	id := requested.ApprovalID
	if _, err := uuid.Parse(id); err != nil || requested.Tool != "send_webhook" {
		t.Fatalf("approval_requested payload %+v", requested)
	}

	// Pending: visible to the room's members, nothing sent.
	state, approvals := approvalsOf(t, ctx, b, turnID)
	if state != "RUNNING" || len(approvals) != 1 {
		t.Fatalf("turn %s with approvals %+v, want RUNNING with one", state, approvals)
	}
	pending := approvals[0]
	var args struct {
		Endpoint string
		Payload  map[string]string
	}
	if err := json.Unmarshal(pending.Arguments, &args); err != nil {
		t.Fatalf("arguments %s: %v", pending.Arguments, err)
	}
	if pending.ID != id || pending.TurnID != turnID || pending.Tool != "send_webhook" || pending.State != "PENDING" || pending.Executed ||
		args.Endpoint != "ops" || args.Payload["deploy"] != "v2" || !pending.ExpiresAt.Equal(requested.ExpiresAt) {
		t.Fatalf("pending approval %+v (arguments %+v), want %s PENDING for send_webhook to ops", pending, args, id)
	}

	decided := func() int64 {
		var n int64
		if err := h.DB.QueryRowContext(ctx, `SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'approval_decided'`, turnID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refusals := []struct {
		name     string
		client   *gqlclient.Client
		id       string
		decision string
		code     string
	}{
		{"a member who is neither author nor owner approves", b, id, "APPROVE", "FORBIDDEN"},
		{"a member who is neither author nor owner rejects", b, id, "REJECT", "FORBIDDEN"},
		{"a non-member approves", m, id, "APPROVE", "NOT_FOUND"},
		{"a malformed approval id", a, "not-a-uuid", "APPROVE", "BAD_USER_INPUT"},
		{"an empty approval id", a, "", "APPROVE", "BAD_USER_INPUT"},
		{"an unknown approval", a, uuid.NewString(), "APPROVE", "NOT_FOUND"},
		{"no envelope", h.ClientWithToken(""), id, "APPROVE", "UNAUTHENTICATED"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decideAs(ctx, tt.client, tt.id, tt.decision); gqlclient.CodeOf(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
		})
	}
	// A decision that is not one is refused by the contract itself.
	if _, err := decideAs(ctx, a, id, "MAYBE"); gqlclient.CodeOf(err) != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("decision MAYBE = %v, want GRAPHQL_VALIDATION_FAILED", err)
	}
	if _, approvals := approvalsOf(t, ctx, a, turnID); len(approvals) != 1 || approvals[0].State != "PENDING" {
		t.Fatalf("after the refusals: %+v, want the approval still PENDING", approvals)
	}
	if n := decided(); n != 0 {
		t.Fatalf("%d approval_decided entries after the refusals", n)
	}
	if got := rec.deliveries(); len(got) != 0 {
		t.Fatalf("%d deliveries before a decision: %+v", len(got), got)
	}

	// Alice, the author and the room's owner, approves.
	approved, err := decideAs(ctx, a, id, "APPROVE")
	if err != nil {
		t.Fatal(err)
	}
	if approved.ID != id || approved.TurnID != turnID || approved.State != "APPROVED" {
		t.Fatalf("alice's approval answered %+v", approved)
	}
	var decidedEntry *approvalEntry
	for {
		e := servertest.NextJournal[approvalEntry](t, ctx, msgs)
		seen = append(seen, e)
		if e.TurnID == nil || *e.TurnID != turnID {
			continue
		}
		if e.Kind == "APPROVAL_DECIDED" {
			decidedEntry = &e
		}
		if e.Kind == "TURN_TERMINAL" {
			break
		}
	}
	if decidedEntry == nil || decidedEntry.ActorID == nil || *decidedEntry.ActorID != aliceID.String() {
		t.Fatalf("approval_decided entry %+v, want one naming alice %s", decidedEntry, aliceID)
	}
	done := servertest.AwaitTurnEnd(t, ctx, a, turnID)
	if done.State != "COMPLETED" || done.Answer == nil || *done.Answer != "Ops was told to deploy v2." {
		t.Fatalf("turn ended %s with answer %v", done.State, done.Answer)
	}
	got := rec.deliveries()
	if len(got) != 1 || got[0].Key != id {
		t.Fatalf("deliveries %+v, want exactly one keyed by the approval %s", got, id)
	}
	var delivered map[string]string
	if err := json.Unmarshal([]byte(got[0].Body), &delivered); err != nil || delivered["deploy"] != "v2" {
		t.Fatalf("delivered body %q (%v), want the proposed payload", got[0].Body, err)
	}
	_, approvals = approvalsOf(t, ctx, b, turnID)
	if len(approvals) != 1 || approvals[0].ID != id || approvals[0].State != "APPROVED" || !approvals[0].Executed {
		t.Fatalf("approvals of the completed turn %+v, want %s APPROVED and executed", approvals, id)
	}

	// A retry converges on the decision; changing it is a CONFLICT. Neither
	// sends anything again or journals another decision.
	for i := range 2 {
		again, err := decideAs(ctx, a, id, "APPROVE")
		if err != nil || again.ID != id || again.State != "APPROVED" || !again.Executed {
			t.Fatalf("retrying the approval (try %d) = %+v, %v; want it APPROVED and executed", i+1, again, err)
		}
	}
	if _, err := decideAs(ctx, a, id, "REJECT"); gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatalf("rejecting an approved approval = %v, want CONFLICT", err)
	}
	if _, err := decideAs(ctx, b, id, "REJECT"); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("bob rejecting after the decision = %v, want FORBIDDEN", err)
	}
	if got := rec.deliveries(); len(got) != 1 {
		t.Fatalf("deliveries after the retries %+v, want still one", got)
	}
	if n := decided(); n != 1 {
		t.Fatalf("%d approval_decided entries, want 1", n)
	}

	// The model was told the effect's result: its second request ends with
	// the tool message for its call.
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("the model endpoint got %d requests, want 2", len(reqs))
	}
	msgs2 := reqs[1]["messages"].([]any)
	if last := msgs2[len(msgs2)-1].(map[string]any); last["role"] != "tool" || last["tool_call_id"] != "call_1" {
		t.Fatalf("second request ends with %v, want the tool result for call_1", last)
	}
}
