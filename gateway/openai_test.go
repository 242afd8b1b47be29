package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// chunk is one chat.completion.chunk as real servers stream it: delta is
// the choice's delta object, finish its finish_reason ("" for null).
func chunk(delta, finish string) string {
	reason := "null"
	if finish != "" {
		reason = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-9x2Lq","object":"chat.completion.chunk","created":1733011200,"model":"gpt-test","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, reason)
}

// usageChunk is the last chunk of a stream asked to include usage.
func usageChunk(in, out int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-9x2Lq","object":"chat.completion.chunk","created":1733011200,"model":"gpt-test","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// writeEvents writes chunks as server-sent events, flushing each.
func writeEvents(w http.ResponseWriter, chunks ...string) {
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
}

// startStream sends a streaming response's headers.
func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// streamOK answers with chunks and then [DONE].
func streamOK(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		writeEvents(w, chunks...)
		writeEvents(w, "[DONE]")
	}
}

// apiError answers with status and an OpenAI error body.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

// fakeServer is an OpenAI-compatible endpoint counting its requests.
type fakeServer struct {
	*httptest.Server
	requests atomic.Int32
}

func newFakeServer(t *testing.T, h http.HandlerFunc) *fakeServer {
	t.Helper()
	s := &fakeServer{}
	// A handler's context also ends with the test, so handlers holding a
	// stream open until their client goes away let Close return even when
	// the client never does.
	testCtx := t.Context()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(testCtx, cancel)()
		h(w, r.WithContext(ctx))
	}))
	t.Cleanup(s.Close)
	return s
}

// provider returns a provider for s with cfg's other settings.
func (s *fakeServer) provider(cfg OpenAIConfig) *OpenAI {
	cfg.BaseURL = s.URL + "/v1"
	cfg.HTTPClient = s.Client()
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	return NewOpenAI(cfg)
}

// deltas records what a provider emits.
type deltas struct {
	mu  sync.Mutex
	all []Delta
}

func (d *deltas) emit(x Delta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, x)
}

func (d *deltas) list() []Delta {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.all)
}

var userHello = []Message{{Role: "user", Content: "Say hello."}}

// streamWithin runs p.Stream and fails the test if it does not return
// within limit.
func streamWithin(t *testing.T, limit time.Duration, ctx context.Context, p *OpenAI, req Request, emit func(Delta)) (Result, error) {
	t.Helper()
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := p.Stream(ctx, req, emit)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(limit):
		t.Fatalf("Stream did not return within %s", limit)
		return Result{}, nil
	}
}

func TestOpenAIStreamsText(t *testing.T) {
	s := newFakeServer(t, streamOK(
		chunk(`{"role":"assistant","content":"","refusal":null}`, ""),
		chunk(`{"content":"Hel"}`, ""),
		chunk(`{"content":"lo"}`, ""),
		chunk(`{"content":", there."}`, ""),
		chunk(`{}`, "stop"),
		usageChunk(12, 4),
	))
	var got deltas
	res, err := s.provider(OpenAIConfig{}).Stream(context.Background(), Request{Messages: userHello}, got.emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []Delta{
		{Text: "Hel"}, {Text: "lo"}, {Text: ", there."},
		{Usage: &Usage{InputTokens: 12, OutputTokens: 4}},
		{Finish: "stop"},
	}
	if d := got.list(); !reflect.DeepEqual(d, want) {
		t.Errorf("deltas = %s, want %s", fmtDeltas(d), fmtDeltas(want))
	}
	wantRes := Result{Text: "Hello, there.", FinishReason: "stop", Usage: Usage{InputTokens: 12, OutputTokens: 4}}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("result = %+v, want %+v", res, wantRes)
	}
}

func TestOpenAIAssemblesToolCalls(t *testing.T) {
	// Two parallel calls, their arguments split over several chunks and
	// the second call's fragments interleaved with the first's.
	s := newFakeServer(t, streamOK(
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"weather","arguments":""}}],"refusal":null}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Os"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_t2","type":"function","function":{"name":"clock","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"zone\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"lo\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":" \"UTC\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(80, 31),
	))
	var got deltas
	res, err := s.provider(OpenAIConfig{}).Stream(context.Background(), Request{Messages: userHello}, got.emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	calls := []ToolCall{
		{ID: "call_w1", Name: "weather", Arguments: `{"city": "Oslo"}`},
		{ID: "call_t2", Name: "clock", Arguments: `{"zone": "UTC"}`},
	}
	want := []Delta{
		{ToolCall: &calls[0]}, {ToolCall: &calls[1]},
		{Usage: &Usage{InputTokens: 80, OutputTokens: 31}},
		{Finish: "tool_calls"},
	}
	if d := got.list(); !reflect.DeepEqual(d, want) {
		t.Errorf("deltas = %s, want %s", fmtDeltas(d), fmtDeltas(want))
	}
	wantRes := Result{ToolCalls: calls, FinishReason: "tool_calls", Usage: Usage{InputTokens: 80, OutputTokens: 31}}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("result = %+v, want %+v", res, wantRes)
	}
}

func TestOpenAIToolCallsWholeAtOneIndex(t *testing.T) {
	// Some servers send each call whole, all at index 0, and finish with
	// "stop"; no usage either.
	s := newFakeServer(t, streamOK(
		chunk(`{"role":"assistant","content":"Checking."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Bergen\"}"}}]}`, ""),
		chunk(`{"content":""}`, "stop"),
	))
	var got deltas
	res, err := s.provider(OpenAIConfig{}).Stream(context.Background(), Request{Messages: userHello}, got.emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	calls := []ToolCall{
		{ID: "call_a", Name: "weather", Arguments: `{"city":"Oslo"}`},
		{ID: "call_b", Name: "weather", Arguments: `{"city":"Bergen"}`},
	}
	want := []Delta{{Text: "Checking."}, {ToolCall: &calls[0]}, {ToolCall: &calls[1]}, {Finish: "tool_calls"}}
	if d := got.list(); !reflect.DeepEqual(d, want) {
		t.Errorf("deltas = %s, want %s", fmtDeltas(d), fmtDeltas(want))
	}
	if res.Text != "Checking." || res.FinishReason != "tool_calls" || !reflect.DeepEqual(res.ToolCalls, calls) {
		t.Errorf("result = %+v", res)
	}
}

func TestOpenAIRequestBody(t *testing.T) {
	var (
		body []byte
		auth string
	)
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		auth = r.Header.Get("Authorization")
		streamOK(chunk(`{"content":"Tomorrow: 5°C."}`, "stop"), usageChunk(1, 1))(w, r)
	})
	turnCtx := TurnContext(time.Date(2025, 3, 7, 9, 30, 0, 0, time.UTC), "Ada")
	req := Request{
		Model: "gpt-route",
		Messages: []Message{
			{Role: "system", Content: "You are terse."},
			{Role: "user", Content: "Weather in Oslo?"},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Oslo"}`}}},
			{Role: "tool", Content: `{"temp":3}`, ToolCallID: "call_1"},
			{Role: "assistant", Content: "3°C."},
			{Role: "user", Content: "And tomorrow?", Context: turnCtx},
		},
		Tools: []ToolSpec{
			{Name: "weather", Description: "Weather for a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "clock"},
		},
		Effort:          "high", // not sent: the config does not enable it
		MaxOutputTokens: 256,
	}
	p := s.provider(OpenAIConfig{APIKey: "sk-test", Model: "gpt-default"})
	if _, err := p.Stream(context.Background(), req, func(Delta) {}); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := `{
		"model": "gpt-route",
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": "Weather in Oslo?"},
			{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
			{"role": "tool", "content": "{\"temp\":3}", "tool_call_id": "call_1"},
			{"role": "assistant", "content": "3°C."},
			{"role": "user", "content": ` + mustJSON(t, "["+turnCtx+"]\n\nAnd tomorrow?") + `}
		],
		"tools": [
			{"type": "function", "function": {"name": "weather", "description": "Weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
			{"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}
		],
		"max_tokens": 256,
		"stream": true,
		"stream_options": {"include_usage": true}
	}`
	assertJSON(t, body, want)
	if auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want the configured key", auth)
	}
}

func TestOpenAIModelAndEffort(t *testing.T) {
	var body []byte
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		streamOK(chunk(`{"content":"ok"}`, "stop"))(w, r)
	})
	p := s.provider(OpenAIConfig{Model: "gpt-default", Effort: true})
	if _, err := p.Stream(context.Background(), Request{Messages: userHello, Effort: "low"}, func(Delta) {}); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var got struct {
		Model           string `json:"model"`
		ReasoningEffort string `json:"reasoning_effort"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "gpt-default" || got.ReasoningEffort != "low" {
		t.Errorf("model, reasoning_effort = %q, %q; want the configured default and low", got.Model, got.ReasoningEffort)
	}

	before := s.requests.Load()
	noModel := NewOpenAI(OpenAIConfig{BaseURL: s.URL + "/v1", HTTPClient: s.Client()})
	_, err := noModel.Stream(context.Background(), Request{Messages: userHello}, func(Delta) {})
	if err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("Stream without a model: err = %v, want a no-model error", err)
	}
	if n := s.requests.Load() - before; n != 0 {
		t.Errorf("Stream without a model sent %d requests", n)
	}
}

func TestOpenAIAuthError(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				apiError(w, status, "invalid_request_error", "Incorrect API key provided.")
			})
			var got deltas
			_, err := s.provider(OpenAIConfig{APIKey: "sk-wrong", MaxRetries: 3}).Stream(context.Background(), Request{Messages: userHello}, got.emit)
			if !errors.Is(err, ErrProviderAuth) || !strings.Contains(err.Error(), "authentication") {
				t.Fatalf("err = %v, want ErrProviderAuth", err)
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("requests = %d, want exactly 1", n)
			}
			if d := got.list(); len(d) != 0 {
				t.Errorf("emitted %s on failure", fmtDeltas(d))
			}
		})
	}
}

func TestOpenAIRetriesRateLimitAfterRetryAfter(t *testing.T) {
	var (
		mu    sync.Mutex
		times []time.Time
	)
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		first := len(times) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			apiError(w, http.StatusTooManyRequests, "requests", "Rate limit reached.")
			return
		}
		streamOK(chunk(`{"content":"ok"}`, "stop"), usageChunk(3, 1))(w, r)
	})
	res, err := s.provider(OpenAIConfig{}).Stream(context.Background(), Request{Messages: userHello}, func(Delta) {})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.Text != "ok" {
		t.Errorf("text = %q, want ok", res.Text)
	}
	if n := s.requests.Load(); n != 2 {
		t.Fatalf("requests = %d, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After's 1s", gap)
	}
}

func TestOpenAIRateLimitedThroughRetries(t *testing.T) {
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		apiError(w, http.StatusTooManyRequests, "requests", "Rate limit reached.")
	})
	_, err := s.provider(OpenAIConfig{MaxRetries: 2}).Stream(context.Background(), Request{Messages: userHello}, func(Delta) {})
	if !errors.Is(err, ErrProviderRateLimited) {
		t.Fatalf("err = %v, want ErrProviderRateLimited", err)
	}
	if n := s.requests.Load(); n != 3 {
		t.Errorf("requests = %d, want MaxRetries+1 = 3", n)
	}
}

func TestOpenAIServerErrorRetriedThenUnavailable(t *testing.T) {
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		apiError(w, http.StatusInternalServerError, "server_error", "The server had an error.")
	})
	_, err := s.provider(OpenAIConfig{MaxRetries: 1}).Stream(context.Background(), Request{Messages: userHello}, func(Delta) {})
	if !errors.Is(err, ErrProviderUnavailable) {
		t.Fatalf("err = %v, want ErrProviderUnavailable", err)
	}
	if n := s.requests.Load(); n != 2 {
		t.Errorf("requests = %d, want MaxRetries+1 = 2", n)
	}
}

func TestOpenAIStreamCut(t *testing.T) {
	t.Run("connection closed", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			startStream(w)
			writeEvents(w, chunk(`{"role":"assistant","content":""}`, ""), chunk(`{"content":"Half an ans"}`, ""))
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		})
		var got deltas
		res, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{}), Request{Messages: userHello}, got.emit)
		if !errors.Is(err, ErrStreamCut) {
			t.Fatalf("err = %v, want ErrStreamCut", err)
		}
		if !reflect.DeepEqual(res, Result{}) {
			t.Errorf("result = %+v, want none", res)
		}
		if d := got.list(); !reflect.DeepEqual(d, []Delta{{Text: "Half an ans"}}) {
			t.Errorf("deltas = %s, want the text before the cut and no finish", fmtDeltas(d))
		}
		if n := s.requests.Load(); n != 1 {
			t.Errorf("requests = %d: a started stream must not be retried", n)
		}
	})
	t.Run("ended without finish", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			startStream(w)
			writeEvents(w, chunk(`{"role":"assistant","content":"Half"}`, ""))
		})
		res, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{}), Request{Messages: userHello}, func(Delta) {})
		if !errors.Is(err, ErrStreamCut) {
			t.Fatalf("err = %v, want ErrStreamCut", err)
		}
		if !reflect.DeepEqual(res, Result{}) {
			t.Errorf("result = %+v, want none", res)
		}
	})
	t.Run("error event", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			startStream(w)
			writeEvents(w, chunk(`{"role":"assistant","content":"Half"}`, ""), `{"error":{"message":"model crashed","type":"server_error"}}`)
		})
		_, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{}), Request{Messages: userHello}, func(Delta) {})
		if !errors.Is(err, ErrStreamCut) || !strings.Contains(err.Error(), "model crashed") {
			t.Fatalf("err = %v, want ErrStreamCut with the server's message", err)
		}
	})
}

func TestOpenAIIdleStream(t *testing.T) {
	t.Run("between chunks", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			startStream(w)
			writeEvents(w, chunk(`{"role":"assistant","content":"Thinking"}`, ""))
			<-r.Context().Done()
		})
		start := time.Now()
		_, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{IdleTimeout: 200 * time.Millisecond}), Request{Messages: userHello}, func(Delta) {})
		if !errors.Is(err, ErrStreamIdle) {
			t.Fatalf("err = %v, want ErrStreamIdle", err)
		}
		if el := time.Since(start); el < 200*time.Millisecond {
			t.Errorf("gave up after %s, before the idle timeout", el)
		}
	})
	t.Run("before headers", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		_, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{IdleTimeout: 200 * time.Millisecond}), Request{Messages: userHello}, func(Delta) {})
		if !errors.Is(err, ErrStreamIdle) {
			t.Fatalf("err = %v, want ErrStreamIdle", err)
		}
	})
	t.Run("error body", func(t *testing.T) {
		s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "120")
			w.WriteHeader(http.StatusInternalServerError)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		_, err := streamWithin(t, 5*time.Second, context.Background(), s.provider(OpenAIConfig{MaxRetries: -1, IdleTimeout: 200 * time.Millisecond}), Request{Messages: userHello}, func(Delta) {})
		if !errors.Is(err, ErrStreamIdle) {
			t.Fatalf("err = %v, want ErrStreamIdle", err)
		}
		if n := s.requests.Load(); n != 1 {
			t.Errorf("requests = %d, want 1 with MaxRetries -1", n)
		}
	})
}

func TestOpenAIContextCancel(t *testing.T) {
	s := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		startStream(w)
		writeEvents(w, chunk(`{"role":"assistant","content":"Once upon"}`, ""))
		<-r.Context().Done() // until the client goes away
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first delta cancels the step; the stream then stays open.
	_, err := streamWithin(t, 5*time.Second, ctx, s.provider(OpenAIConfig{}), Request{Messages: userHello}, func(Delta) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestToolCallsInIndexOrder(t *testing.T) {
	var calls toolCalls
	for _, js := range []string{
		`{"index":1,"id":"call_b","type":"function","function":{"name":"b","arguments":"{\"x\":"}}`,
		`{"index":0,"id":"call_a","type":"function","function":{"name":"a","arguments":""}}`,
		`{"index":1,"function":{"arguments":"2}"}}`,
	} {
		var d openai.ChatCompletionChunkChoiceDeltaToolCall
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatal(err)
		}
		calls.add(d)
	}
	want := []ToolCall{{ID: "call_a", Name: "a", Arguments: "{}"}, {ID: "call_b", Name: "b", Arguments: `{"x":2}`}}
	if got := calls.list(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %+v, want %+v", got, want)
	}
}

func TestNormaliseFinish(t *testing.T) {
	for _, c := range []struct {
		reason string
		tools  bool
		want   string
	}{
		{"stop", false, "stop"},
		{"length", false, "length"},
		{"content_filter", false, "content_filter"},
		{"tool_calls", true, "tool_calls"},
		{"function_call", true, "tool_calls"},
		{"stop", true, "tool_calls"},
		{"eos", false, "stop"},
		{"length", true, "length"},
	} {
		if got := normaliseFinish(c.reason, c.tools); got != c.want {
			t.Errorf("normaliseFinish(%q, %v) = %q, want %q", c.reason, c.tools, got, c.want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertJSON compares JSON documents by value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("request body:\n%s\nwant:\n%s", gi, wi)
	}
}

func fmtDeltas(ds []Delta) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		switch {
		case d.ToolCall != nil:
			parts[i] = fmt.Sprintf("call%+v", *d.ToolCall)
		case d.Usage != nil:
			parts[i] = fmt.Sprintf("usage%+v", *d.Usage)
		case d.Finish != "":
			parts[i] = "finish:" + d.Finish
		default:
			parts[i] = fmt.Sprintf("text:%q", d.Text)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
