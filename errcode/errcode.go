package errcode

import (
	"errors"
	"fmt"
	"time"
)

// Code is a client-visible failure class, spelled as GraphQL extensions.code.
type Code string

const (
	// Unauthenticated: no identity envelope, or one that does not verify.
	Unauthenticated Code = "UNAUTHENTICATED"
	// Forbidden: the caller is known but may not do this.
	Forbidden Code = "FORBIDDEN"
	// NotFound: no such thing, or one the caller may not see (the two are
	// indistinguishable on purpose).
	NotFound Code = "NOT_FOUND"
	// BadUserInput: an argument or the request itself is invalid.
	BadUserInput Code = "BAD_USER_INPUT"
	// Conflict: the request contradicts the current state (an idempotency
	// key reused with other text, a finished turn).
	Conflict Code = "CONFLICT"
	// RateLimited: too many commands or streams; retry after
	// extensions.retryAfterMs.
	RateLimited Code = "RATE_LIMITED"
	// PayloadTooLarge: the request body or query document is over its
	// limit.
	PayloadTooLarge Code = "PAYLOAD_TOO_LARGE"
	// Unavailable: the server cannot serve now (its database is
	// restarting, it is shutting down); retry.
	Unavailable Code = "UNAVAILABLE"
	// Internal: a bug. It is logged; the client sees no detail.
	Internal Code = "INTERNAL"
	// ParseFailed and ValidationFailed are gqlgen's: the document does
	// not parse, or does not validate against the schema (including
	// variables of the wrong type, depth and complexity limits).
	ParseFailed      Code = "GRAPHQL_PARSE_FAILED"
	ValidationFailed Code = "GRAPHQL_VALIDATION_FAILED"
)

// Codes is the closed set of codes the server sends.
func Codes() []Code {
	return []Code{Unauthenticated, Forbidden, NotFound, BadUserInput, Conflict, RateLimited,
		PayloadTooLarge, Unavailable, Internal, ParseFailed, ValidationFailed}
}

// Known reports whether c is in the closed set.
func Known(c Code) bool {
	for _, k := range Codes() {
		if k == c {
			return true
		}
	}
	return false
}

// Retryable reports whether a client may retry a request that failed with
// c unchanged: only when the server was unavailable or the caller was
// rate limited. Everything else fails the same way again.
func (c Code) Retryable() bool { return c == Unavailable || c == RateLimited }

// Error is a failure whose message is safe to show to the caller.
type Error struct {
	Code    Code
	Message string
	// Field names the offending input field, when there is one.
	Field string
	// RetryAfter, when positive, is how long the caller should wait
	// before retrying (RATE_LIMITED, UNAVAILABLE).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is lets errors.Is(err, errcode.ErrNotFound) match any NOT_FOUND error.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is on a class of failure.
var (
	ErrUnauthenticated = &Error{Code: Unauthenticated}
	ErrForbidden       = &Error{Code: Forbidden}
	ErrNotFound        = &Error{Code: NotFound}
	ErrBadUserInput    = &Error{Code: BadUserInput}
	ErrConflict        = &Error{Code: Conflict}
	ErrRateLimited     = &Error{Code: RateLimited}
	ErrUnavailable     = &Error{Code: Unavailable}
)

// New returns an *Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a BAD_USER_INPUT error naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: BadUserInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

// From returns the *Error in err's chain, if any.
func From(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
