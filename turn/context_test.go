package turn_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/turn"
)

// recordingModel answers like the builtin model and keeps every request
// it received, exactly as the provider saw it.
type recordingModel struct {
	mu   sync.Mutex
	reqs []gateway.Request
}

func (m *recordingModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return gateway.Builtin{}.Stream(ctx, req, emit)
}

func (m *recordingModel) requests() []gateway.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]gateway.Request(nil), m.reqs...)
}

// The clock snapshot and the member's name ride on the message that
// started the turn, on that message only, and are never saved: not in the
// turn's input, not in the journal, not on earlier turns' messages in
// later requests.
func TestTurnContextRidesOnTheTurnsMessageOnly(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	rec := &recordingModel{}
	clock := time.Date(2026, 12, 4, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	env.Runner(t, turn.RunnerConfig{
		Gateway: gateway.New(map[string]gateway.Provider{"builtin": rec}),
		Now:     func() time.Time { return clock },
	})
	first := env.Submit(t, env.Alice, env.Shared.ID, "what day is it?")
	env.WaitTerminal(t, first.ID)
	second := env.Submit(t, env.Bob, env.Shared.ID, "and tomorrow?")
	env.WaitTerminal(t, second.ID)

	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	wantClock := "Friday, 4 December 2026, 08:30 UTC (timezone: UTC)"
	for i, tt := range []struct {
		input, name string
	}{{"what day is it?", "Alice"}, {"and tomorrow?", "Bob"}} {
		carried := 0
		for _, m := range reqs[i].Messages {
			if m.Context == "" {
				continue
			}
			carried++
			if m.Content != tt.input || m.Role != "user" {
				t.Errorf("request %d: context on %s message %q, want only on the turn's own", i, m.Role, m.Content)
			}
			if !strings.Contains(m.Context, wantClock) || !strings.Contains(m.Context, `"`+tt.name+`"`) {
				t.Errorf("request %d: context %q, want the UTC clock %q and the name %q", i, m.Context, wantClock, tt.name)
			}
			if strings.Contains(m.Content, "UTC") {
				t.Errorf("request %d: the snapshot leaked into the message text %q", i, m.Content)
			}
		}
		if carried != 1 {
			t.Errorf("request %d: %d messages carry context, want exactly 1", i, carried)
		}
	}
	// The earlier turn appears in the second request as history, bare.
	sawHistory := false
	for _, m := range reqs[1].Messages {
		if m.Content == "what day is it?" {
			sawHistory = true
			if m.Context != "" {
				t.Errorf("an earlier turn's message carries context %q", m.Context)
			}
		}
	}
	if !sawHistory {
		t.Error("the second request does not include the first turn")
	}
	// Nothing of it is stored.
	for _, e := range env.Entries(t, env.Shared.ID) {
		if strings.Contains(string(e.Payload), "UTC") || strings.Contains(string(e.Payload), "timezone") {
			t.Errorf("journal entry %d (%s) stores the runtime context: %s", e.Seq, e.Kind, e.Payload)
		}
	}
}

// A member whose envelope had no usable name gets no name label at all.
func TestTurnContextWithoutName(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	rec := &recordingModel{}
	env.Runner(t, turn.RunnerConfig{Gateway: gateway.New(map[string]gateway.Provider{"builtin": rec})})
	nameless, err := env.Members.Ensure(context.Background(), authorityIdentity("nameless@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Rooms.AddMember(context.Background(), env.Alice, env.Shared.ID.String(), nameless.Email); err != nil {
		t.Fatal(err)
	}
	tt := env.Submit(t, nameless, env.Shared.ID, "hello")
	env.WaitTerminal(t, tt.ID)
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, m := range reqs[0].Messages {
		if m.Context != "" && (strings.Contains(m.Context, "named") || !strings.Contains(m.Context, "UTC")) {
			t.Fatalf("context %q: want the clock and no name label", m.Context)
		}
	}
}
