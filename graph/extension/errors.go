package extension

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
)

// ErrorPresenter maps every error a client sees to one code of the closed
// set in errcode, with extensions.retryable (true only for UNAVAILABLE and
// RATE_LIMITED) and extensions.retryAfterMs where the server knows it.
// Errors that are not the caller's to fix are logged and sent as
// "internal error" with code INTERNAL: no SQL text or stack trace reaches a
// client.
func ErrorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		out := graphql.DefaultErrorPresenter(ctx, err)
		code, msg := classify(ctx, err)
		switch code {
		case errcode.Internal:
			log.ErrorContext(ctx, "internal error", "path", out.Path, "err", err)
			out.Message = "internal error"
		case errcode.Unavailable:
			if errcode.StorageUnavailable(err) {
				log.WarnContext(ctx, "database unavailable", "path", out.Path, "err", err)
			}
			out.Message = msg
		default:
			out.Message = msg
		}
		return Present(out, code, err)
	}
}

// Present sets out's extensions for code: the code, retryable and, when
// err carries one, retryAfterMs and the offending field. Every error the
// server writes, GraphQL or not, goes through it.
func Present(out *gqlerror.Error, code errcode.Code, err error) *gqlerror.Error {
	ext := map[string]any{"code": string(code), "retryable": code.Retryable()}
	if e, ok := errcode.From(err); ok {
		if e.Field != "" {
			ext["field"] = e.Field
		}
		if e.RetryAfter > 0 {
			ext["retryAfterMs"] = e.RetryAfter.Milliseconds()
		}
	}
	out.Extensions = ext
	return out
}

// gqlgen's own codes outside the closed set, and what they are in it.
var gqlgenCodes = map[string]errcode.Code{
	string(errcode.ParseFailed):      errcode.ParseFailed,
	string(errcode.ValidationFailed): errcode.ValidationFailed,
	"COMPLEXITY_LIMIT_EXCEEDED":      errcode.ValidationFailed,
}

// classify decides an error's code and the message the client sees.
func classify(ctx context.Context, err error) (errcode.Code, string) {
	if e, ok := errcode.From(err); ok {
		return e.Code, e.Message
	}
	if errors.Is(err, authority.ErrUnauthenticated) {
		return errcode.Unauthenticated, err.Error()
	}
	if errcode.StorageUnavailable(err) {
		return errcode.Unavailable, "the database is unavailable; retry"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errcode.Unavailable, "request cancelled"
	}
	var gqlErr *gqlerror.Error
	if !errors.As(err, &gqlErr) {
		return errcode.Internal, ""
	}
	if c, ok := gqlErr.Extensions["code"].(string); ok {
		if mapped, ok := gqlgenCodes[c]; ok {
			return mapped, withoutValue(gqlErr)
		}
		if errcode.Known(errcode.Code(c)) {
			return errcode.Code(c), gqlErr.Message
		}
		return errcode.Internal, ""
	}
	if argumentError(ctx) {
		// gqlgen could not coerce an argument (an enum value that does
		// not exist, a scalar that does not parse): the caller's input.
		return errcode.BadUserInput, gqlErr.Message
	}
	if len(gqlErr.Path) == 0 && gqlErr.Err == nil {
		// A request-level error gqlgen raised itself: a body it could
		// not read, no operation, an unknown operation name.
		return errcode.BadUserInput, gqlErr.Message
	}
	// A field-level error that is none of ours (a non-null field
	// resolved to null): a bug.
	return errcode.Internal, ""
}

// enumValueEcho is gqlparser's refusal of a variable's enum value, which
// quotes the value: "<value> is not a valid <Enum>".
var enumValueEcho = regexp.MustCompile(`^.* is not a valid (\w+)$`)

// withoutValue is the message of a refused variable without the value the
// client sent in it (an error never echoes the request): gqlparser quotes
// an enum value it does not know, and a number it cannot keep as an ID.
// Its other refusals name only the variable, in the error's path, and
// types.
func withoutValue(e *gqlerror.Error) string {
	if len(e.Path) == 0 || e.Path[0] != ast.PathName("variable") {
		return e.Message
	}
	if m := enumValueEcho.FindStringSubmatch(e.Message); m != nil {
		return "the value is not a valid " + m[1]
	}
	if strings.HasPrefix(e.Message, "cannot use ") && strings.Contains(e.Message, " as ID") {
		return "cannot use this number as an ID: send it as a string"
	}
	return e.Message
}

// argumentError reports whether the error being presented was raised
// while gqlgen coerced the current field's arguments: their arguments are
// set only once coercion succeeded.
func argumentError(ctx context.Context) bool {
	if !graphql.HasOperationContext(ctx) {
		return false
	}
	fc := graphql.GetFieldContext(ctx)
	return fc != nil && fc.Args == nil && fc.Field.Definition != nil && len(fc.Field.Definition.Arguments) > 0
}

// Recover turns a resolver panic into an INTERNAL error for that one
// operation; the server keeps serving. The panic is logged.
func Recover(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", "panic", p)
		return errors.New("internal error")
	}
}
