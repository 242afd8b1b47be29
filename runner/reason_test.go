package runner_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/runner"
)

// erringModel fails every request with err, after a little text.
type erringModel struct{ err error }

func (m erringModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	emit(gateway.Delta{Text: "partial "})
	return gateway.Result{}, fmt.Errorf("provider call: %w", m.err)
}

// A failed turn names its cause: each of the gateway's failures a member
// or an operator acts on differently ends with its own terminal reason,
// and anything else is runtime_failed.
func TestFailureReasonNamesTheCause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{gateway.ErrProviderRateLimited, outcome.ReasonModelRateLimited},
		{gateway.ErrProviderUnavailable, outcome.ReasonModelUnavailable},
		{gateway.ErrProviderAuth, outcome.ReasonModelAuthFailed},
		{gateway.ErrStreamCut, outcome.ReasonModelStreamCut},
		{gateway.ErrStreamIdle, outcome.ReasonModelStreamIdle},
		{gateway.ErrModelNotAllowed, outcome.ReasonModelRouteInvalid},
		{fmt.Errorf("something else"), outcome.ReasonRuntimeFailed},
	} {
		t.Run(c.want, func(t *testing.T) {
			t.Parallel()
			env := testkit.New(t)
			env.Runner(t, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": erringModel{err: c.err}})})
			tt := env.Submit(t, env.Alice, env.Shared.ID, "hello")
			got := env.WaitTerminal(t, tt.ID)
			if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != c.want {
				t.Fatalf("turn ended %s (%v), want failed %s", got.State, got.TerminalReason, c.want)
			}
		})
	}
}
