package startstop

import (
	"context"
	"sync"
)

type state int

const (
	idle state = iota
	running
	stopping
)

// BaseStartStop is the embedded lifecycle of a service.
type BaseStartStop struct {
	mu     sync.Mutex
	state  state
	cancel context.CancelFunc
	done   chan struct{}
}

// StartInit begins a start. It reports false when the service was started
// or stopped before; otherwise it returns the context the service's
// goroutines run under (cancelled by Stop) and the func the service calls
// once they have all exited. A service whose set-up fails after StartInit
// calls stopped before returning its error.
func (b *BaseStartStop) StartInit(ctx context.Context) (context.Context, bool, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != idle {
		return ctx, false, nil
	}
	b.state = running
	ctx, b.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	b.done = done
	var once sync.Once
	return ctx, true, func() { once.Do(func() { close(done) }) }
}

// Started reports whether the service started and has not been told to
// stop.
func (b *BaseStartStop) Started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == running
}

// Stop cancels the service's context and blocks until its goroutines have
// exited. Safe to call twice, concurrently, and before Start.
func (b *BaseStartStop) Stop() {
	b.mu.Lock()
	b.state = stopping
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel == nil {
		return // never started
	}
	cancel()
	<-done
}
