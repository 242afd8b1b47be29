package server

import (
	"context"
	"sync/atomic"
	"time"
)

// anonymousGate bounds the GraphQL requests without an identity envelope
// that one replica serves at once (Limits.AnonRequests). Such a request can
// run only __typename and introspection, and each is bounded before it is
// parsed; the gate bounds them together, so that callers nobody can hold
// to account cannot keep the replica's cores busy however fast they send:
// four anonymous clients sending 64 KiB documents as fast as they were
// answered took both cores and a member's p99 from under a millisecond to
// tens. A slot rests anonRest times as long as its request held it before
// the next request may have it, so that requests without an envelope
// together keep at most AnonRequests/(1+anonRest) of a core busy, however
// fast they come: the rest of the machine is the members'. A request
// waits its turn, first come first served, up to anonWait; at most
// anonQueue per slot wait at once. Past either it is
// RATE_LIMITED (the edge takes the gate once the request's body is read).
// WebSocket upgrades do not pass through it:
// their sockets run nothing and have bounds of their own.
type anonymousGate struct {
	slots   chan struct{}
	waiting atomic.Int64
	queue   int64
}

// How long, and how many, requests without an envelope wait for the
// gate, and how long a slot rests after each, in multiples of its use.
const (
	anonWait  = time.Second
	anonQueue = 64
	anonRest  = 3
)

func newAnonymousGate(n int) *anonymousGate {
	return &anonymousGate{slots: make(chan struct{}, n), queue: int64(n) * anonQueue}
}

// enter takes a slot, waiting in line for at most anonWait, and returns
// the function that gives it back once the request is served: after
// anonRest times as long as the request held it.
func (g *anonymousGate) enter(ctx context.Context) (leave func(), ok bool) {
	if !g.take(ctx) {
		return nil, false
	}
	start := time.Now()
	return func() {
		time.AfterFunc(anonRest*time.Since(start), func() { <-g.slots })
	}, true
}

func (g *anonymousGate) take(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	if g.waiting.Add(1) > g.queue {
		g.waiting.Add(-1)
		return false
	}
	defer g.waiting.Add(-1)
	timer := time.NewTimer(anonWait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}
