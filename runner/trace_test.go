package runner_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tracing"
)

// TestOneTracePerTurnAcrossATakeover: a turn is one trace from its
// acceptance on. The acceptance's span is the root; the first attempt's
// run (on one runner) and the attempt that takes it over after its lease
// expired (on another) are both its children — the trace context
// travels with the turn row, not with a process — and each run's model
// steps, tool calls and terminal are children of that run.
func TestOneTracePerTurnAcrossATakeover(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	tracer := tracing.Tracer(tp)
	env.Turns.Tracer = tracer

	gate := testkit.NewGatedModel()
	env.Runner(t, runner.Config{Owner: "first", Gateway: gate.Gateway(), LeaseTTL: time.Minute, Heartbeat: time.Hour, Tracer: tracer})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "trace me across replicas")
	<-gate.Started
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	b := env.Runner(t, runner.Config{Owner: "second", Tracer: tracer})
	if took, err := b.Resume(ctx, tt.ID); err != nil || !took {
		t.Fatalf("takeover: took=%v err=%v", took, err)
	}
	if got := env.WaitTerminal(t, tt.ID); got.State != "completed" || got.Attempt != 2 {
		t.Fatalf("turn %s on attempt %d", got.State, got.Attempt)
	}
	close(gate.Release) // the first run wakes, is fenced and ends

	runs := func() []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans.GetSpans() {
			if s.Name == "turn.run" {
				out = append(out, s)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(runs()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d run spans ended, want 2", len(runs()))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	all := spans.GetSpans()
	var submit *tracetest.SpanStub
	for i, s := range all {
		if s.Name == "turn.submit" && attr(s, "turngate.turn") == tt.ID.String() {
			submit = &all[i]
		}
	}
	if submit == nil {
		t.Fatal("no turn.submit span for the turn")
	}
	trace := submit.SpanContext.TraceID()
	byRunner := map[string]tracetest.SpanStub{}
	for _, r := range runs() {
		if r.SpanContext.TraceID() != trace || r.Parent.SpanID() != submit.SpanContext.SpanID() {
			t.Fatalf("run span of %s is not a child of the acceptance (trace %s parent %s; want %s %s)",
				attr(r, "turngate.runner"), r.SpanContext.TraceID(), r.Parent.SpanID(), trace, submit.SpanContext.SpanID())
		}
		byRunner[attr(r, "turngate.runner")] = r
	}
	first, second := byRunner["first"], byRunner["second"]
	if attr(first, "turngate.attempt") != "1" || attr(second, "turngate.attempt") != "2" {
		t.Fatalf("run spans: first attempt %s, second %s", attr(first, "turngate.attempt"), attr(second, "turngate.attempt"))
	}
	children := map[string][]string{} // run span id -> child names
	for _, s := range all {
		if s.SpanContext.TraceID() != trace {
			continue
		}
		for name, r := range byRunner {
			if s.Parent.SpanID() == r.SpanContext.SpanID() {
				children[name] = append(children[name], s.Name)
			}
		}
	}
	has := func(names []string, want string) bool {
		for _, n := range names {
			if n == want {
				return true
			}
		}
		return false
	}
	if !has(children["first"], "model.step") {
		t.Fatalf("the first run's children %v: want its model step", children["first"])
	}
	if !has(children["second"], "model.step") || !has(children["second"], "turn.terminal") {
		t.Fatalf("the second run's children %v: want its model step and the terminal", children["second"])
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}
