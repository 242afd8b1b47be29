package callback_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/runner"
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

// A member whose envelope had no usable name gets no name label at all.
func TestTurnContextWithoutName(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	rec := &recordingModel{}
	env.Runner(t, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": rec})})
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

func authorityIdentity(email string) authority.Identity {
	return authority.Identity{Subject: "test|" + email, Email: email}
}
