package extension

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/lib/pq"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
)

// TestPresenterCodes: whatever error reaches the presenter, the client
// sees one code of the closed set with retryable as the set says; storage
// that cannot serve is UNAVAILABLE, gqlgen's own codes are mapped, and
// anything unknown is INTERNAL with no detail.
func TestPresenterCodes(t *testing.T) {
	present := ErrorPresenter(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, nil)
	wrap := func(err error) error { return fmt.Errorf("read room: %w", err) }
	tests := []struct {
		name string
		err  error
		code errcode.Code
	}{
		{"domain not found", errcode.New(errcode.NotFound, "no such room"), errcode.NotFound},
		{"domain conflict, wrapped", wrap(errcode.New(errcode.Conflict, "key reused")), errcode.Conflict},
		{"rate limited", &errcode.Error{Code: errcode.RateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond}, errcode.RateLimited},
		{"unauthenticated", authority.ErrUnauthenticated, errcode.Unauthenticated},
		{"plain error", errors.New("boom"), errcode.Internal},
		{"connection refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), errcode.Unavailable},
		{"bad connection", wrap(driver.ErrBadConn), errcode.Unavailable},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), errcode.Unavailable},
		{"admin shutdown", wrap(&pq.Error{Code: "57P01"}), errcode.Unavailable},
		{"cannot connect now", wrap(&pq.Error{Code: "57P03"}), errcode.Unavailable},
		{"too many clients", wrap(&pq.Error{Code: "53300"}), errcode.Unavailable},
		{"connection failure", wrap(&pq.Error{Code: "08006"}), errcode.Unavailable},
		{"closed pool", wrap(errors.New("sql: database is closed")), errcode.Unavailable},
		{"deadlock victim", wrap(&pq.Error{Code: "40P01"}), errcode.Unavailable},
		{"serialization failure", wrap(&pq.Error{Code: "40001"}), errcode.Unavailable},
		{"unique violation", wrap(&pq.Error{Code: "23505"}), errcode.Internal},
		{"NUL the driver refused", wrap(&pq.Error{Code: "22021"}), errcode.Internal},
		{"deadline", wrap(context.DeadlineExceeded), errcode.Unavailable},
		{"parse failure", &gqlerror.Error{Message: "Unexpected }", Extensions: map[string]any{"code": "GRAPHQL_PARSE_FAILED"}}, errcode.ParseFailed},
		{"validation failure", &gqlerror.Error{Message: "no field x", Extensions: map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}}, errcode.ValidationFailed},
		{"complexity", &gqlerror.Error{Message: "too complex", Extensions: map[string]any{"code": "COMPLEXITY_LIMIT_EXCEEDED"}}, errcode.ValidationFailed},
		{"an unknown gqlgen code", &gqlerror.Error{Message: "x", Extensions: map[string]any{"code": "PERSISTED_QUERY_NOT_FOUND"}}, errcode.Internal},
		{"request-level, no code", &gqlerror.Error{Message: "no operation provided"}, errcode.BadUserInput},
		{"field-level, no code", &gqlerror.Error{Message: "must not be null", Path: ast.Path{ast.PathName("me")}}, errcode.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := present(ctx, tt.err)
			code, _ := out.Extensions["code"].(string)
			if code != string(tt.code) || !errcode.Known(errcode.Code(code)) {
				t.Fatalf("code = %q, want %s", code, tt.code)
			}
			if r, ok := out.Extensions["retryable"].(bool); !ok || r != tt.code.Retryable() {
				t.Fatalf("retryable = %v, want %v", out.Extensions["retryable"], tt.code.Retryable())
			}
			if tt.code == errcode.Internal && out.Message != "internal error" {
				t.Fatalf("an internal error shows %q", out.Message)
			}
		})
	}
	out := present(ctx, &errcode.Error{Code: errcode.RateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond})
	if ms := out.Extensions["retryAfterMs"]; ms != int64(1500) {
		t.Fatalf("retryAfterMs = %v, want 1500", ms)
	}
}

// TestPresenterKeepsVariableValuesOut: gqlparser's refusals of a
// variable quote an enum value it does not know and a number it cannot
// keep as an ID; the client sees the refusal without the value. Other
// validation messages pass as they are.
func TestPresenterKeepsVariableValuesOut(t *testing.T) {
	present := ErrorPresenter(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, nil)
	validation := map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}
	variable := ast.Path{ast.PathName("variable"), ast.PathName("input"), ast.PathName("kind")}
	for _, tt := range []struct {
		err        *gqlerror.Error
		echo, want string
	}{
		{&gqlerror.Error{Message: "SECRET-KIND is not a valid ConversationKind", Path: variable, Extensions: validation},
			"SECRET-KIND", "the value is not a valid ConversationKind"},
		{&gqlerror.Error{Message: "cannot use 9.007199254740993e+21 as ID: integers beyond 2^53-1 may have been rounded", Path: variable, Extensions: validation},
			"9.007199254740993e+21", "cannot use this number as an ID: send it as a string"},
		{&gqlerror.Error{Message: "cannot use string as Int", Path: variable, Extensions: validation}, "", "cannot use string as Int"},
		{&gqlerror.Error{Message: `Cannot query field "nope" on type "Query".`, Extensions: validation}, "", `Cannot query field "nope" on type "Query".`},
	} {
		out := present(ctx, tt.err)
		if out.Message != tt.want || tt.echo != "" && strings.Contains(out.Message, tt.echo) {
			t.Errorf("%q: presented %q, want %q", tt.err.Message, out.Message, tt.want)
		}
	}
}

// TestRetryableCodes: only UNAVAILABLE and RATE_LIMITED are retryable.
func TestRetryableCodes(t *testing.T) {
	for _, c := range errcode.Codes() {
		if want := c == errcode.Unavailable || c == errcode.RateLimited; c.Retryable() != want {
			t.Errorf("%s: retryable %v", c, c.Retryable())
		}
	}
}
