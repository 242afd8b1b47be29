package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Errors a provider returns when it cannot finish a step. They wrap the
// underlying cause, so errors.Is finds both.
var (
	// ErrProviderAuth: the endpoint refused the credential (401 or 403).
	// It is never retried.
	ErrProviderAuth = errors.New("model provider refused authentication")
	// ErrProviderRateLimited: the endpoint kept answering 429 through every
	// retry.
	ErrProviderRateLimited = errors.New("model provider rate limited the request")
	// ErrProviderUnavailable: the endpoint kept failing (5xx, 408, or no
	// connection) through every retry.
	ErrProviderUnavailable = errors.New("model provider unavailable")
	// ErrStreamCut: the answer's stream broke off, or carried an error,
	// before the model finished. What was streamed is not a result.
	ErrStreamCut = errors.New("model stream cut before the model finished")
	// ErrStreamIdle: the answer's stream sent nothing for the idle timeout.
	ErrStreamIdle = errors.New("model stream idle")
)

// Defaults of OpenAIConfig.
const (
	DefaultOpenAIBaseURL     = "https://api.openai.com/v1/"
	DefaultOpenAIMaxRetries  = 2
	DefaultOpenAIIdleTimeout = 60 * time.Second
)

// OpenAIConfig configures an OpenAI provider.
type OpenAIConfig struct {
	// BaseURL is the endpoint's API root, such as http://localhost:8000/v1
	// for vLLM or http://localhost:11434/v1 for Ollama; empty means
	// DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is used when a request names none.
	Model string
	// MaxRetries bounds the retries of a refused request (429, 5xx, no
	// connection); zero means DefaultOpenAIMaxRetries, negative means none.
	// A request is only retried before its stream starts.
	MaxRetries int
	// IdleTimeout bounds each wait for the endpoint: for response headers,
	// then for the stream's next data; zero or less means
	// DefaultOpenAIIdleTimeout.
	IdleTimeout time.Duration
	// HTTPClient, when set, replaces the SDK's default client.
	HTTPClient *http.Client
	// Effort says the endpoint accepts reasoning_effort. Off by default,
	// as some compatible servers reject fields they do not know.
	Effort bool
}

// OpenAI is a provider for any endpoint speaking OpenAI's Chat Completions
// API with streaming: OpenAI itself and compatible servers (vLLM, Ollama,
// llama.cpp server, hosted APIs).
//
// The base URL and API key come from the config only, never from the
// environment; other settings the SDK reads from the environment
// (OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_CUSTOM_HEADERS) still apply.
type OpenAI struct {
	client openai.Client
	model  string
	effort bool
	idle   time.Duration
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI provider for cfg.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultOpenAIMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cmp.Or(cfg.BaseURL, DefaultOpenAIBaseURL)),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(retries),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = DefaultOpenAIIdleTimeout
	}
	return &OpenAI{
		client: openai.NewClient(opts...),
		model:  cfg.Model,
		effort: cfg.Effort,
		idle:   idle,
	}
}

// Stream implements Provider. Text is emitted as it arrives; tool calls,
// usage and the finish reason once the stream has ended well. A step that
// cannot finish returns an error wrapping ErrProviderAuth,
// ErrProviderRateLimited, ErrProviderUnavailable, ErrStreamCut,
// ErrStreamIdle or the context's error, and no result.
func (p *OpenAI) Stream(ctx context.Context, req Request, emit func(Delta)) (Result, error) {
	params, err := p.params(req)
	if err != nil {
		return Result{}, err
	}

	// The watchdog cancels the step when the endpoint goes quiet: it runs
	// only while an attempt waits for its response headers or a read
	// waits for body data, so neither the SDK's waits between retries
	// nor a slow emit count as idle.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(p.idle, func() { cancel(ErrStreamIdle) })
	defer watchdog.Stop()
	watch := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		watchdog.Reset(p.idle)
		res, err := next(r)
		watchdog.Stop()
		if res != nil && res.Body != nil {
			res.Body = idleBody{ReadCloser: res.Body, watchdog: watchdog, idle: p.idle}
		}
		return res, err
	})

	stream := p.client.Chat.Completions.NewStreaming(sctx, params, watch)
	defer stream.Close()
	if err := stream.Err(); err != nil {
		return Result{}, p.fail(ctx, sctx, err, false)
	}

	var (
		text     strings.Builder
		calls    toolCalls
		finish   string
		usage    Usage
		hasUsage bool
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			usage = Usage{InputTokens: int(chunk.Usage.PromptTokens), OutputTokens: int(chunk.Usage.CompletionTokens)}
			hasUsage = true
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue // only one choice is asked for
			}
			if c.Delta.Content != "" {
				text.WriteString(c.Delta.Content)
				emit(Delta{Text: c.Delta.Content})
			}
			for _, tc := range c.Delta.ToolCalls {
				calls.add(tc)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return Result{}, p.fail(ctx, sctx, err, true)
	}
	if finish == "" {
		return Result{}, fmt.Errorf("openai: %w: the stream ended without a finish reason", ErrStreamCut)
	}

	res := Result{Text: text.String(), ToolCalls: calls.list(), Usage: usage}
	res.FinishReason = normaliseFinish(finish, len(res.ToolCalls) > 0)
	for i := range res.ToolCalls {
		emit(Delta{ToolCall: &res.ToolCalls[i]})
	}
	if hasUsage {
		emit(Delta{Usage: &res.Usage})
	}
	emit(Delta{Finish: res.FinishReason})
	return res, nil
}

// idleBody runs the idle watchdog while a read of a response body waits.
type idleBody struct {
	io.ReadCloser
	watchdog *time.Timer
	idle     time.Duration
}

func (b idleBody) Read(p []byte) (int, error) {
	b.watchdog.Reset(b.idle)
	defer b.watchdog.Stop()
	return b.ReadCloser.Read(p)
}

// params maps a gateway request onto a Chat Completions request.
func (p *OpenAI) params(req Request) (openai.ChatCompletionNewParams, error) {
	model := cmp.Or(req.Model, p.model)
	if model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("openai: no model: the route names none and the provider has no default model")
	}
	params := openai.ChatCompletionNewParams{
		Model:         model,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	for i, m := range req.Messages {
		msg, err := chatMessage(m)
		if err != nil {
			return params, fmt.Errorf("openai: message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t.Parameters)
		if err != nil {
			return params, fmt.Errorf("openai: tool %q: %w", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if req.Effort != "" && p.effort {
		params.ReasoningEffort = shared.ReasoningEffort(req.Effort)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxTokens = openai.Int(int64(req.MaxOutputTokens))
	}
	return params, nil
}

// chatMessage maps one gateway message; its content is always Rendered.
func chatMessage(m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case "system":
		return openai.SystemMessage(m.Rendered()), nil
	case "user":
		return openai.UserMessage(m.Rendered()), nil
	case "tool":
		return openai.ToolMessage(m.Rendered(), m.ToolCallID), nil
	case "assistant":
		var a openai.ChatCompletionAssistantMessageParam
		if text := m.Rendered(); text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(text)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      c.Name,
						Arguments: cmp.Or(c.Arguments, "{}"),
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

// toolSchema decodes a tool's JSON Schema; none means an object without
// properties. Values stay raw JSON, so the schema is sent as it was given.
func toolSchema(raw json.RawMessage) (shared.FunctionParameters, error) {
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("parameters are not a JSON Schema object: %w", err)
		}
	}
	if len(fields) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	schema := make(shared.FunctionParameters, len(fields))
	for k, v := range fields {
		schema[k] = v
	}
	return schema, nil
}

// toolCalls assembles streamed tool-call fragments by their index.
type toolCalls struct {
	calls []*indexedCall
}

type indexedCall struct {
	index int64
	call  ToolCall
	args  strings.Builder
}

// add folds one fragment into its call. A fragment bearing a new id at an
// index already in use starts another call: some servers send each whole
// call at index 0.
func (t *toolCalls) add(d openai.ChatCompletionChunkChoiceDeltaToolCall) {
	var c *indexedCall
	for i := len(t.calls) - 1; i >= 0; i-- {
		if t.calls[i].index == d.Index {
			c = t.calls[i]
			break
		}
	}
	if c == nil || (d.ID != "" && c.call.ID != "" && d.ID != c.call.ID) {
		c = &indexedCall{index: d.Index}
		t.calls = append(t.calls, c)
	}
	if d.ID != "" {
		c.call.ID = d.ID
	}
	if d.Function.Name != "" {
		c.call.Name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}

// list returns the whole calls in index order.
func (t *toolCalls) list() []ToolCall {
	if len(t.calls) == 0 {
		return nil
	}
	slices.SortStableFunc(t.calls, func(a, b *indexedCall) int { return cmp.Compare(a.index, b.index) })
	out := make([]ToolCall, len(t.calls))
	for i, c := range t.calls {
		out[i] = c.call
		out[i].Arguments = cmp.Or(c.args.String(), "{}")
	}
	return out
}

// normaliseFinish maps an endpoint's finish reason onto stop, tool_calls,
// length or content_filter. A step that asked for tools finished for them,
// whatever the endpoint called it.
func normaliseFinish(reason string, calledTools bool) string {
	switch reason {
	case "length", "content_filter":
		return reason
	}
	if calledTools || reason == "tool_calls" || reason == "function_call" {
		return "tool_calls"
	}
	return "stop"
}

// fail turns an SDK error into the provider's errors. parent is the
// caller's context, sctx the step's; streaming says whether the stream had
// begun.
func (p *OpenAI) fail(parent, sctx context.Context, err error, streaming bool) error {
	if parent.Err() != nil {
		return fmt.Errorf("openai: %w", parent.Err())
	}
	if errors.Is(context.Cause(sctx), ErrStreamIdle) {
		return fmt.Errorf("openai: %w: nothing received for %s", ErrStreamIdle, p.idle)
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		status := fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
		switch code := apiErr.StatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return fmt.Errorf("openai: %w (%s): check the provider's API key", ErrProviderAuth, status)
		case code == http.StatusTooManyRequests:
			return fmt.Errorf("openai: %w (%s) after retries: %s", ErrProviderRateLimited, status, apiErr.Message)
		case code == http.StatusRequestTimeout || code >= 500:
			return fmt.Errorf("openai: %w (%s) after retries: %s", ErrProviderUnavailable, status, apiErr.Message)
		default:
			return fmt.Errorf("openai: request refused (%s): %s", status, apiErr.Message)
		}
	}
	if streaming {
		return fmt.Errorf("openai: %w: %w", ErrStreamCut, err)
	}
	return fmt.Errorf("openai: %w: %w", ErrProviderUnavailable, err)
}
