package startstop_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/startstop"
)

type service struct {
	startstop.BaseStartStop
	exited chan struct{}
}

func (s *service) Start(ctx context.Context) bool {
	ctx, ok, stopped := s.StartInit(ctx)
	if !ok {
		return false
	}
	go func() {
		defer stopped()
		<-ctx.Done()
		close(s.exited)
	}()
	return true
}

func TestStopWaitsForTheGoroutine(t *testing.T) {
	t.Parallel()
	s := &service{exited: make(chan struct{})}
	if !s.Start(context.Background()) {
		t.Fatal("first Start refused")
	}
	if !s.Started() {
		t.Fatal("Started is false after Start")
	}
	s.Stop()
	select {
	case <-s.exited:
	default:
		t.Fatal("Stop returned before the service's goroutine exited")
	}
	if s.Started() {
		t.Fatal("Started is true after Stop")
	}
}

func TestStartTwiceIsRefused(t *testing.T) {
	t.Parallel()
	s := &service{exited: make(chan struct{})}
	if !s.Start(context.Background()) {
		t.Fatal("first Start refused")
	}
	defer s.Stop()
	if s.Start(context.Background()) {
		t.Fatal("second Start accepted")
	}
}

func TestStopIsSafeTwiceConcurrentlyAndBeforeStart(t *testing.T) {
	t.Parallel()
	never := &service{exited: make(chan struct{})}
	never.Stop()
	never.Stop()
	if never.Start(context.Background()) {
		t.Fatal("a service stopped before it started was started")
	}

	s := &service{exited: make(chan struct{})}
	s.Start(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop() }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("concurrent Stops did not return")
	}
}

func TestCancellingTheParentContextStopsTheService(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{exited: make(chan struct{})}
	s.Start(ctx)
	cancel()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the service outlived its parent context")
	}
	s.Stop()
}
