package callback

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/lease"
)

// Bounds of a stored model call (turn replay): each message's content and
// the response text are clipped to maxCallContent bytes, and a request of
// more than maxCallMessages messages keeps its first and last ones. A run
// makes at most its step budget's model calls, each stored once.
const (
	maxCallContent  = 8 << 10
	maxCallMessages = 64
)

// recordCall stores one model call of the run, fenced by its lease token:
// a run that no longer owns the turn stores nothing. A call that cannot be
// stored is logged, not fatal: the run's own writes will fail the same way.
func (h *Host) recordCall(ctx context.Context, purpose, route string, step gateway.Step, res gateway.Result, callErr error, took time.Duration) {
	h.deps.Metrics.ModelStep(route, purpose, took, res.Usage.InputTokens, res.Usage.OutputTokens, callErr != nil)
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	req, resp := h.storedCall(step.Request, res)
	if callErr != nil {
		resp = gateway.StoredResponse{}
	}
	rawReq, err := json.Marshal(req)
	if err != nil {
		h.log.Warn("encode model call", "err", err)
		return
	}
	rawResp, err := json.Marshal(resp)
	if err != nil {
		h.log.Warn("encode model call", "err", err)
		return
	}
	errText := ""
	if callErr != nil {
		errText = guard.Bound(callErr.Error(), 1024)
	}
	if err := h.deps.Store.RecordModelCall(context.WithoutCancel(ctx), lease.ModelCallParams{Claim: h.claim, Step: n,
		Purpose: purpose, Route: route, Request: rawReq, Response: rawResp, InputTokens: res.Usage.InputTokens,
		OutputTokens: res.Usage.OutputTokens, Took: took, Error: errText}); err != nil && !errors.Is(err, lease.ErrFenced) {
		h.log.Warn("store model call", "step", n, "err", err)
	}
}

// storedCall is the redacted, bounded form of one call.
func (h *Host) storedCall(greq gateway.Request, res gateway.Result) (gateway.StoredRequest, gateway.StoredResponse) {
	var req gateway.StoredRequest
	msgs := greq.Messages
	if len(msgs) > maxCallMessages {
		head := maxCallMessages / 4
		req.Omitted = len(msgs) - maxCallMessages
		msgs = append(append([]gateway.Message(nil), msgs[:head]...), msgs[len(msgs)-(maxCallMessages-head):]...)
	}
	for _, m := range msgs {
		c, cut := h.clip(m.Content)
		req.Truncated = req.Truncated || cut
		out := gateway.Message{Role: m.Role, Content: c, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, h.storedToolCall(tc))
		}
		req.Messages = append(req.Messages, out)
	}
	for _, t := range greq.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	text, cut := h.clip(res.Text)
	resp := gateway.StoredResponse{Text: text, FinishReason: res.FinishReason, Truncated: cut}
	for _, tc := range res.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, h.storedToolCall(tc))
	}
	return req, resp
}

func (h *Host) storedToolCall(tc gateway.ToolCall) gateway.ToolCall {
	args, _ := h.clip(tc.Arguments)
	return gateway.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args}
}

// clip redacts s and bounds it, reporting whether it was cut.
func (h *Host) clip(s string) (string, bool) {
	s, _ = h.deps.Redactor.Redact(s)
	b := guard.Bound(s, maxCallContent)
	return b, len(b) < len(s)
}
