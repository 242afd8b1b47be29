package extension

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/sync/semaphore"

	"github.com/turngate/turngate/errcode"
)

// ParseBudget bounds the query documents one replica parses and validates
// at once, by weight: what each may hold once parsed (queryWeight, as the
// parsed-query cache weighs it). Each document's bounds (QueryLimit) keep
// one request's cost in check; the budget keeps many at once from adding
// up — 32 concurrent 64 KiB list literals took a replica from 150 to 344
// MB. Requests without an identity envelope may hold at most a quarter of
// it, so that they cannot starve members.
//
// A document takes its weight without waiting: past the budget it is
// refused with RATE_LIMITED and a retryAfter of ParseRetryAfter, which the
// client may honour, rather than queueing requests and the bodies they
// hold. A document heavier than what it may take at all takes all of it,
// so that none is refused for ever.
type ParseBudget struct {
	size, anonSize int64
	all, anon      *semaphore.Weighted
}

// ParseRetryAfter is the wait a document refused by the budget is told
// to retry after: a 64 KiB document parses and validates in tens of
// milliseconds.
const ParseRetryAfter = 100 * time.Millisecond

// NewParseBudget returns a budget of size bytes.
func NewParseBudget(size int64) *ParseBudget {
	anon := max(size/4, 1)
	return &ParseBudget{size: size, anonSize: anon, all: semaphore.NewWeighted(size), anon: semaphore.NewWeighted(anon)}
}

// TryAcquire takes weight of the budget — and of its anonymous quarter
// when anonymous — if it is free now, and returns the function that gives
// it back.
func (b *ParseBudget) TryAcquire(weight int64, anonymous bool) (release func(), ok bool) {
	weight = max(weight, 1)
	if anonymous {
		w := min(weight, b.anonSize)
		if !b.anon.TryAcquire(w) {
			return nil, false
		}
		release, ok := b.TryAcquire(w, false)
		if !ok {
			b.anon.Release(w)
			return nil, false
		}
		return func() { release(); b.anon.Release(w) }, true
	}
	w := min(weight, b.size)
	if !b.all.TryAcquire(w) {
		return nil, false
	}
	return func() { b.all.Release(w) }, true
}

// Executor wraps gqlgen's executor so that what QueryLimit takes of the
// budget for a document is given back as soon as gqlgen has parsed and
// validated it (or refused it): when CreateOperationContext returns. Only
// documents that go through it can take of the budget.
func (b *ParseBudget) Executor(exec graphql.GraphExecutor) graphql.GraphExecutor {
	return budgetedExecutor{exec}
}

type budgetedExecutor struct{ graphql.GraphExecutor }

func (e budgetedExecutor) CreateOperationContext(ctx context.Context, p *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	h := &heldBudget{}
	defer h.release()
	return e.GraphExecutor.CreateOperationContext(context.WithValue(ctx, heldBudgetKey{}, h), p)
}

type heldBudgetKey struct{}

// heldBudget is what one CreateOperationContext call took of the budget.
type heldBudget struct{ releases []func() }

func (h *heldBudget) release() {
	for _, r := range h.releases {
		r()
	}
	h.releases = nil
}

// take takes weight of the budget for the document being created in ctx.
func (b *ParseBudget) take(ctx context.Context, weight int64, anonymous bool) *errcode.Error {
	h, _ := ctx.Value(heldBudgetKey{}).(*heldBudget)
	if h == nil {
		// Not wrapped by Executor: nothing would give it back.
		return errcode.New(errcode.Internal, "the parse budget is not wired to the executor")
	}
	release, ok := b.TryAcquire(weight, anonymous)
	if !ok {
		msg := "too many query documents are being parsed on this server; retry shortly"
		if anonymous {
			msg = "too many query documents without an identity envelope are being parsed on this server; retry shortly"
		}
		return &errcode.Error{Code: errcode.RateLimited, Message: msg, RetryAfter: ParseRetryAfter}
	}
	h.releases = append(h.releases, release)
	return nil
}
