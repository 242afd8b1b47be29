package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/runner"
)

// TestWatchIsSharedPerRoom: fifty subscriptions watching one room share
// one lease watcher, which stops when the last of them leaves.
func TestWatchIsSharedPerRoom(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	r := env.Runner(t, runner.Config{})
	room := env.Shared.ID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("waiting until %s", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	const subs = 50
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, subs)
	for i := range subs {
		sctx, stop := context.WithCancel(ctx)
		cancels[i] = stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Watch(sctx, room)
		}()
	}
	wait("every subscription watches", func() bool { refs, _ := r.Watching(room); return refs == subs })
	if _, n := r.Watching(room); n != 1 {
		t.Fatalf("%d watchers for one room", n)
	}
	for _, stop := range cancels[1:] {
		stop()
	}
	wait("one subscription is left", func() bool { refs, _ := r.Watching(room); return refs == 1 })
	cancels[0]()
	wg.Wait()
	if refs, n := r.Watching(room); refs != 0 || n != 0 {
		t.Fatalf("after the last left: %d refs, %d watchers", refs, n)
	}
}
