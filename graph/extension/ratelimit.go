package extension

import (
	"context"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"golang.org/x/time/rate"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
)

// CommandLimit is the gqlgen extension that rate-limits each member's
// commands: every mutation, since every mutation writes — rooms and
// their members, messages, steers, cancels, approvals, resumes and the
// admin surface. Each member has a token bucket of Burst commands
// refilled at Rate per second, on this replica; each root field of a
// mutation spends one, and one past it is RATE_LIMITED with
// retryAfterMs, and does not run. The defaults allow a fast typist and a
// script; the database guards the rest (idempotency keys and command ids
// make a retried command converge).
type CommandLimit struct {
	Rate  float64
	Burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

var (
	_ graphql.HandlerExtension     = (*CommandLimit)(nil)
	_ graphql.RootFieldInterceptor = (*CommandLimit)(nil)
)

func (*CommandLimit) ExtensionName() string                   { return "CommandLimit" }
func (*CommandLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l *CommandLimit) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rc := graphql.GetRootFieldContext(ctx)
	// The operation's type says it is a mutation (gqlgen's
	// RootFieldContext.Object holds the field's name, not its type's).
	// Every field of a mutation counts, a new one included, but
	// __typename, which writes nothing.
	if rc == nil || rc.Field.Name == "__typename" ||
		!graphql.HasOperationContext(ctx) || graphql.GetOperationContext(ctx).Operation.Operation != ast.Mutation {
		return next(ctx)
	}
	id, ok := authority.IdentityFromContext(ctx)
	if !ok {
		return next(ctx) // the resolver refuses it: UNAUTHENTICATED
	}
	if wait := l.take(id.Subject, time.Now()); wait > 0 {
		graphql.AddError(ctx, &errcode.Error{
			Code:       errcode.RateLimited,
			Message:    "too many commands: retry after retryAfterMs",
			RetryAfter: wait,
		})
		return graphql.Null
	}
	return next(ctx)
}

// take spends one token of member's bucket, or returns how long until one
// is there (and spends nothing).
func (l *CommandLimit) take(member string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	l.sweep(now)
	b, ok := l.buckets[member]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.Rate), l.Burst)}
		l.buckets[member] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// sweep forgets buckets that have refilled: a member who comes back gets
// a full bucket, exactly what the forgotten one would hold. So the map
// holds only members active within one refill time.
func (l *CommandLimit) sweep(now time.Time) {
	full := time.Duration(float64(l.Burst) / l.Rate * float64(time.Second))
	if now.Sub(l.swept) < full {
		return
	}
	l.swept = now
	for m, b := range l.buckets {
		if now.Sub(b.used) >= full {
			delete(l.buckets, m)
		}
	}
}
