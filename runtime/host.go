package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Controller drives one run by calling back into the backend.
type Controller interface {
	Run(ctx context.Context, c Contract, cb Callbacks) error
}

// registry is static: controllers are compiled in, never loaded.
var registry = map[string]func() Controller{
	"single": func() Controller { return single{} },
}

// Controllers lists the registered controller names.
func Controllers() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownController refuses a contract naming no registered controller.
var ErrUnknownController = errors.New("unknown controller")

// ErrAlreadyCompleted refuses a second completion of one run.
var ErrAlreadyCompleted = errors.New("run already completed")

// ErrNotCompleted reports a controller that returned without completing.
var ErrNotCompleted = errors.New("controller returned without completing the run")

// Admit checks that a contract names a registered controller.
func Admit(c Contract) error {
	if _, ok := registry[c.Controller]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownController, c.Controller)
	}
	return nil
}

// Run creates one controller for the contract and runs it under the
// host's lifecycle rules.
func Run(ctx context.Context, c Contract, cb Callbacks) error {
	newController, ok := registry[c.Controller]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownController, c.Controller)
	}
	g := &guarded{next: cb}
	if err := newController().Run(ctx, c, g); err != nil {
		return err
	}
	if !g.completed() {
		return ErrNotCompleted
	}
	return nil
}

// guarded enforces the lifecycle rules on the controller's callbacks.
type guarded struct {
	next Callbacks
	mu   sync.Mutex
	done bool
}

var _ Callbacks = (*guarded)(nil)

func (g *guarded) completed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

func (g *guarded) Model(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (ModelResult, error) {
	if g.completed() {
		return ModelResult{}, ErrAlreadyCompleted
	}
	return g.next.Model(ctx, req, onDelta)
}

func (g *guarded) Complete(ctx context.Context, c Completion) error {
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		return ErrAlreadyCompleted
	}
	g.done = true
	g.mu.Unlock()
	return g.next.Complete(ctx, c)
}
