// Package errcode is the one vocabulary of failures a client may see. Domain
// packages return *Error values for every failure that is the caller's to
// fix; the GraphQL error presenter turns them into extensions.code and
// treats anything else as an internal error that is logged, not shown.
package errcode

import (
	"errors"
	"fmt"
)

// Code is a client-visible failure class, spelled as GraphQL extensions.code.
type Code string

const (
	Unauthenticated Code = "UNAUTHENTICATED"
	Forbidden       Code = "FORBIDDEN"
	NotFound        Code = "NOT_FOUND"
	BadUserInput    Code = "BAD_USER_INPUT"
	Conflict        Code = "CONFLICT"
	Unavailable     Code = "UNAVAILABLE"
)

// Error is a failure whose message is safe to show to the caller.
type Error struct {
	Code    Code
	Message string
	// Field names the offending input field, when there is one.
	Field string
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
