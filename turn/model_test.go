package turn_test

import (
	"context"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
)

type turnState = ent.Turn

// gatedModel is a model provider whose step blocks until the test lets it
// go (or the run's context ends), so a test can act while a turn is
// mid-answer.
type gatedModel struct {
	started chan struct{}
	release chan struct{}
}

func newGatedModel() *gatedModel {
	return &gatedModel{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gatedModel) gateway() *gateway.Gateway {
	return gateway.New(map[string]gateway.Provider{"builtin": g})
}

func (g *gatedModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	emit(gateway.Delta{Text: "partial "})
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return gateway.Result{}, ctx.Err()
	}
	emit(gateway.Delta{Text: "answer"})
	return gateway.Result{Text: "partial answer", FinishReason: "stop"}, nil
}
