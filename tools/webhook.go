package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"
)

// Effectful is a tool with an external effect. It crosses the write
// guard: the member's permission, read at the call, and — when
// NeedsApproval says so — the approval gate, where a member decides. The
// backend then executes it at most once per approval, passing the
// approval's id as the call's idempotency key.
type Effectful interface {
	Tool
	NeedsApproval() bool
}

// SendWebhookName is the webhook tool's name.
const SendWebhookName = "send_webhook"

// SendWebhook posts a JSON payload to one of the configured, allow-listed
// endpoints — by name: the model never supplies a URL.
type SendWebhook struct {
	// Endpoints maps an endpoint's name to its URL.
	Endpoints map[string]string
	Client    *http.Client
}

var _ Effectful = SendWebhook{}

// Spec implements Tool.
func (w SendWebhook) Spec() Spec {
	names := make([]string, 0, len(w.Endpoints))
	for n := range w.Endpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	enum, _ := json.Marshal(names)
	return Spec{
		Name:        SendWebhookName,
		Description: "Send a JSON payload to a configured endpoint, by name. A member must approve it first.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"endpoint":{"type":"string","enum":` + string(enum) + `},"payload":{"type":"object"}},"required":["endpoint","payload"]}`),
	}
}

// Permission implements Tool.
func (SendWebhook) Permission() string { return "tasks.write" }

// NeedsApproval implements Effectful.
func (SendWebhook) NeedsApproval() bool { return true }

// Run implements Tool: one POST, carrying the approval id as its
// Idempotency-Key so a receiver can tell a retry from a new delivery.
func (w SendWebhook) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Endpoint string          `json:"endpoint"`
		Payload  json.RawMessage `json:"payload"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	url, ok := w.Endpoints[args.Endpoint]
	if !ok {
		return Result{}, &Refusal{Status: "not_allowed", Message: fmt.Sprintf("%q is not a configured endpoint.", args.Endpoint)}
	}
	if len(args.Payload) == 0 || args.Payload[0] != '{' {
		return Result{}, fmt.Errorf("%w: payload must be a JSON object", ErrBadArguments)
	}
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args.Payload))
	if err != nil {
		return Result{}, fmt.Errorf("webhook %s: %w", args.Endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if call.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("webhook %s: %w", args.Endpoint, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 {
		return Result{}, &Refusal{Status: "delivery_failed", Message: fmt.Sprintf("The endpoint %q answered HTTP %d.", args.Endpoint, resp.StatusCode)}
	}
	return Result{Content: fmt.Sprintf("Delivered to %s: HTTP %d.", args.Endpoint, resp.StatusCode)}, nil
}
