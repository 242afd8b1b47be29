package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Code is an error's class: the server's extensions.code, or Network for
// a request that got no GraphQL answer (a dropped connection, an
// unreachable server, an HTTP error from something in between).
type Code string

// The codes (the server's closed set, see its README) and Network.
const (
	Network          Code = "NETWORK"
	Unauthenticated  Code = "UNAUTHENTICATED"
	Forbidden        Code = "FORBIDDEN"
	NotFound         Code = "NOT_FOUND"
	BadUserInput     Code = "BAD_USER_INPUT"
	Conflict         Code = "CONFLICT"
	RateLimited      Code = "RATE_LIMITED"
	PayloadTooLarge  Code = "PAYLOAD_TOO_LARGE"
	Unavailable      Code = "UNAVAILABLE"
	Internal         Code = "INTERNAL"
	ParseFailed      Code = "GRAPHQL_PARSE_FAILED"
	ValidationFailed Code = "GRAPHQL_VALIDATION_FAILED"
)

// Retryable reports whether the browser rule lets a read or subscription
// retry it on its own: network failures, RATE_LIMITED and UNAVAILABLE.
// UNAUTHENTICATED, FORBIDDEN, NOT_FOUND and every other code fail closed.
func (c Code) Retryable() bool { return c == Network || c == RateLimited || c == Unavailable }

var known = map[Code]bool{
	Unauthenticated: true, Forbidden: true, NotFound: true, BadUserInput: true, Conflict: true, RateLimited: true,
	PayloadTooLarge: true, Unavailable: true, Internal: true, ParseFailed: true, ValidationFailed: true,
}

// Error is what a request or stream failed with: every error the client
// returns for the server's or the network's reasons is one.
type Error struct {
	Code    Code
	Message string
	// RetryAfter is how long the server asked to wait, when it said.
	RetryAfter time.Duration
	// Status is the HTTP status of an answer that carried no GraphQL error.
	Status int
	// Err is the underlying error, for a network failure.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("turngate: %s: %s", e.Code, e.Message) }

func (e *Error) Unwrap() error { return e.Err }

// Retryable is e.Code.Retryable().
func (e *Error) Retryable() bool { return e.Code.Retryable() }

// CodeOf is err's code: its *Error's, Network for any other error, "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Network
}

// fromGraphQL is the error a response's GraphQL errors amount to: the
// first one's code.
func fromGraphQL(list gqlerror.List) *Error {
	if len(list) == 0 {
		return &Error{Code: Internal, Message: "empty error list"}
	}
	first := list[0]
	out := &Error{Code: Internal, Message: first.Message}
	if c, ok := first.Extensions["code"].(string); ok && known[Code(c)] {
		out.Code = Code(c)
	}
	if ms, ok := first.Extensions["retryAfterMs"].(float64); ok && ms > 0 {
		out.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	return out
}

// fromHTTPStatus is the error an HTTP status without a GraphQL error
// amounts to: 401/403/404 fail closed, 429 is RATE_LIMITED, any other
// (a 502 from a proxy whose replica went away) is a network failure.
func fromHTTPStatus(status int, body string) *Error {
	e := &Error{Status: status, Message: fmt.Sprintf("HTTP %d %s", status, body)}
	switch status {
	case http.StatusUnauthorized:
		e.Code = Unauthenticated
	case http.StatusForbidden:
		e.Code = Forbidden
	case http.StatusNotFound:
		e.Code = NotFound
	case http.StatusRequestEntityTooLarge:
		e.Code = PayloadTooLarge
	case http.StatusTooManyRequests:
		e.Code = RateLimited
	default:
		e.Code = Network
	}
	return e
}

// classify turns whatever a request or stream returned into an *Error.
func classify(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var list gqlerror.List
	if errors.As(err, &list) {
		return fromGraphQL(list)
	}
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		return fromGraphQL(gqlerror.List{ge})
	}
	var he *graphql.HTTPError
	if errors.As(err, &he) {
		if len(he.Response.Errors) > 0 && he.Response.Errors[0].Extensions["code"] != nil {
			return fromGraphQL(he.Response.Errors)
		}
		return fromHTTPStatus(he.StatusCode, "")
	}
	if code := websocket.CloseStatus(err); code != -1 {
		return fromClose(code, err)
	}
	return &Error{Code: Network, Message: err.Error(), Err: err}
}

// fromClose maps a graphql-transport-ws close code to an error.
func fromClose(code websocket.StatusCode, err error) *Error {
	e := &Error{Message: fmt.Sprintf("WebSocket closed %d", code), Err: err}
	switch code {
	case 4401:
		e.Code = Unauthenticated
	case 4403:
		e.Code = Forbidden
	case 4400, 4406, 4409:
		e.Code = BadUserInput
	case 4429:
		e.Code = RateLimited
	case websocket.StatusServiceRestart, websocket.StatusTryAgainLater:
		e.Code = Unavailable
	default:
		e.Code = Network
	}
	return e
}
