package e2e

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

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
)

// effectModel is an OpenAI-compatible endpoint, speaking the streaming
// wire format, whose model proposes one webhook and, once told the result,
// answers.
func effectModel(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct{ Role string } `json:"messages"`
		Tools    []any                   `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	if len(body.Tools) > 0 && body.Messages[len(body.Messages)-1].Role != "tool" {
		send(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"send_webhook","arguments":"{\"endpoint\":\"ops\",\"payload\":{\"deploy\":\"v2\"}}"}}]}`, "null")
		send(`{}`, `"tool_calls"`)
	} else {
		send(`{"role":"assistant","content":"Sent."}`, "null")
		send(`{}`, `"stop"`)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// countingReceiver counts the webhook deliveries and keeps their keys.
type countingReceiver struct {
	mu   sync.Mutex
	keys []string
}

func (c *countingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.keys = append(c.keys, r.Header.Get("Idempotency-Key"))
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (c *countingReceiver) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

// An approved external effect is delivered exactly once across a kill -9
// between approval and delivery: the run proposing it is killed while it
// waits, the author approves through another replica, and the replacement
// attempt meets the same approval and delivers once, keyed by its id.
func TestApprovedWebhookOnceAcrossKill9(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := httptest.NewServer(http.HandlerFunc(effectModel))
	defer model.Close()
	rec := &countingReceiver{}
	receiver := httptest.NewServer(rec)
	defer receiver.Close()

	w := e2etest.NewWorld(t, bin, "turngate-approval-")
	env := []string{"TURNGATE_LEASE_TTL=2s", "TURNGATE_AGENT_ROUTE=openai",
		"TURNGATE_OPENAI_BASE_URL=" + model.URL, "TURNGATE_OPENAI_API_KEY=sk-local", "TURNGATE_OPENAI_MODEL=m",
		"TURNGATE_WEBHOOKS=ops=" + receiver.URL}
	a := w.Start(t, "replica-a", env...)
	db := w.DB

	c := w.Client(t, a.Base, alice)
	room := servertest.Rooms(t, c)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, c, room.ID, "tell ops to deploy v2", "deploy-v2")
	servertest.WaitFor(t, ctx, db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'approval_requested')`, turnID)
	var approval string
	if err := db.QueryRow(`SELECT id FROM approvals WHERE turn_id = $1`, turnID).Scan(&approval); err != nil {
		t.Fatal(err)
	}
	// The run waiting for the decision dies; the decision comes through
	// another replica.
	a.Kill9(t)
	b := w.Start(t, "replica-b", env...)
	cb := w.Client(t, b.Base, alice)
	var decided struct {
		DecideApproval struct{ State string } `json:"decideApproval"`
	}
	if err := cb.Do(ctx, `mutation($a: ID!) { decideApproval(input: {approvalId: $a, decision: APPROVE}) { state } }`,
		map[string]any{"a": approval}, &decided); err != nil {
		t.Fatal(err)
	}
	if state := servertest.WaitTurnState(t, ctx, db, turnID); state != "completed" {
		t.Fatalf("turn ended %s, want completed", state)
	}
	if got := rec.got(); len(got) != 1 || got[0] != approval {
		t.Fatalf("deliveries %v, want exactly one keyed by approval %s", got, approval)
	}
	var attempt, approvals, terminals int
	if err := db.QueryRow(`SELECT attempt, (SELECT count(*) FROM approvals WHERE turn_id = t.id),
		(SELECT count(*) FROM journal_entries WHERE turn_id = t.id AND kind = 'turn_terminal') FROM turns t WHERE id = $1`, turnID).
		Scan(&attempt, &approvals, &terminals); err != nil {
		t.Fatal(err)
	}
	if attempt != 2 || approvals != 1 || terminals != 1 {
		t.Fatalf("attempt %d, %d approvals, %d terminals; want the second attempt to meet the one approval", attempt, approvals, terminals)
	}
}
