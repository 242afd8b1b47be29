package graph

import (
	"context"
	"errors"
	"log/slog"
)

// errStreamEnded ends a subscription normally (the client gets "complete").
var errStreamEnded = errors.New("stream ended")

// follow runs produce in a goroutine that owns the returned channel: it is
// the only sender and closes the channel once, when produce returns. Every
// send selects on ctx.Done, so a client that goes away never leaves the
// goroutine blocked. Closing the channel completes the subscription.
func follow[T any](ctx context.Context, produce func(ctx context.Context, emit func(T) error) error) <-chan T {
	ch := make(chan T, 16)
	go func() {
		defer close(ch)
		err := produce(ctx, func(v T) error {
			select {
			case ch <- v:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && !errors.Is(err, errStreamEnded) && ctx.Err() == nil {
			slog.ErrorContext(ctx, "subscription stream failed", "err", err)
		}
	}()
	return ch
}
