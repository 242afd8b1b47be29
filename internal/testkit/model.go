package testkit

import (
	"context"
	"sync"

	"github.com/turngate/turngate/gateway"
)

// ScriptModel answers step n with Script(n, req), or like the builtin
// model when Script returns nil. It keeps every request as the provider
// received it.
type ScriptModel struct {
	Script func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error)

	mu   sync.Mutex
	reqs []gateway.Request
}

// Stream is gateway.Provider's: it records req, then answers by the script.
func (m *ScriptModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	if m.Script != nil {
		res, err := m.Script(ctx, n, req)
		if err != nil {
			return gateway.Result{}, err
		}
		if res != nil {
			if res.Text != "" {
				emit(gateway.Delta{Text: res.Text})
			}
			return *res, nil
		}
	}
	return gateway.Builtin{}.Stream(ctx, req, emit)
}

// Requests is every request the model received so far.
func (m *ScriptModel) Requests() []gateway.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]gateway.Request(nil), m.reqs...)
}

// Gateway routes the builtin model to m.
func (m *ScriptModel) Gateway() *gateway.Gateway {
	return gateway.New(map[string]gateway.Provider{"builtin": m})
}

// GatedModel is a model provider whose step blocks until the test lets it
// go (or the run's context ends), so a test can act while a turn is
// mid-answer. Each step sends on Started once it has streamed its first
// text; a send on (or a close of) Release lets it finish.
type GatedModel struct {
	Started chan struct{}
	Release chan struct{}
}

// NewGatedModel returns a gated model whose steps wait for Release.
func NewGatedModel() *GatedModel {
	return &GatedModel{Started: make(chan struct{}, 16), Release: make(chan struct{})}
}

// Gateway routes the builtin model to g.
func (g *GatedModel) Gateway() *gateway.Gateway {
	return gateway.New(map[string]gateway.Provider{"builtin": g})
}

// Stream is gateway.Provider's: "partial ", a wait for Release, then "answer".
func (g *GatedModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	emit(gateway.Delta{Text: "partial "})
	g.Started <- struct{}{}
	select {
	case <-g.Release:
	case <-ctx.Done():
		return gateway.Result{}, ctx.Err()
	}
	emit(gateway.Delta{Text: "answer"})
	return gateway.Result{Text: "partial answer", FinishReason: "stop"}, nil
}
