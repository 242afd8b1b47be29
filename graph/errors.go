package graph

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
)

// ErrorPresenter maps domain errors to GraphQL errors with
// extensions.code. Errors that are not the caller's to fix are logged and
// sent as "internal error": no SQL text or stack trace reaches a client.
func ErrorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			// Parse and validation errors of the request itself: gqlgen
			// has already given them a code.
			return gqlErr
		}
		out := graphql.DefaultErrorPresenter(ctx, err)
		if e, ok := errcode.From(err); ok {
			out.Message = e.Message
			out.Extensions = map[string]any{"code": string(e.Code)}
			if e.Field != "" {
				out.Extensions["field"] = e.Field
			}
			return out
		}
		if errors.Is(err, authority.ErrUnauthenticated) {
			out.Message = err.Error()
			out.Extensions = map[string]any{"code": string(errcode.Unauthenticated)}
			return out
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			out.Message = "request cancelled"
			out.Extensions = map[string]any{"code": string(errcode.Unavailable)}
			return out
		}
		log.ErrorContext(ctx, "internal error", "path", out.Path, "err", err)
		out.Message = "internal error"
		out.Extensions = map[string]any{"code": "INTERNAL_SERVER_ERROR"}
		return out
	}
}

// Recover turns a resolver panic into an internal error, logged.
func Recover(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", "panic", p)
		return errors.New("internal error")
	}
}
