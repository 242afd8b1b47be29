package authority

import (
	"errors"

	"github.com/turngate/turngate/errcode"
)

// ErrUnauthenticated matches (errors.Is) every envelope failure: the
// GraphQL layer maps it to extensions.code UNAUTHENTICATED.
var ErrUnauthenticated = errors.New("unauthenticated")

// Reasons an envelope is rejected. Each is safe to show to the caller: it
// names what is wrong, never a key, a claim value or a library message.
const (
	ReasonMissing          = "missing identity envelope"
	ReasonAmbiguous        = "more than one identity envelope"
	ReasonMalformed        = "identity envelope malformed"
	ReasonAlgorithm        = "identity envelope algorithm not accepted"
	ReasonNoKeyID          = "identity envelope names no key (kid)"
	ReasonUnknownKey       = "identity envelope signed by a key the provider does not publish"
	ReasonKeyMismatch      = "identity envelope algorithm does not match its key"
	ReasonSignature        = "identity envelope signature invalid"
	ReasonNoExpiry         = "identity envelope has no expiry"
	ReasonExpired          = "identity envelope expired"
	ReasonNotYetValid      = "identity envelope not yet valid"
	ReasonIssuedInFuture   = "identity envelope issued in the future"
	ReasonLifetime         = "identity envelope lifetime longer than allowed"
	ReasonIssuer           = "identity envelope issuer mismatch"
	ReasonAudience         = "identity envelope audience mismatch"
	ReasonNoSubject        = "identity envelope has no subject"
	ReasonSubject          = "identity envelope subject invalid"
	ReasonEmailNotVerified = "email not verified"
	ReasonEmailInvalid     = "identity envelope email invalid"
)

// AuthError is an envelope failure. Error returns only Reason, which is
// safe to show; Cause (possibly nil) is the underlying failure, for logs.
//
// errors.Is(err, ErrUnauthenticated) and errors.Is(err,
// errcode.ErrUnauthenticated) both hold, and errors.As(err, **errcode.Error)
// yields an UNAUTHENTICATED *errcode.Error with Reason as its message, so
// either way of presenting errors gives extensions.code UNAUTHENTICATED.
type AuthError struct {
	Reason string
	Cause  error
}

func unauthenticated(reason string, cause error) *AuthError {
	return &AuthError{Reason: reason, Cause: cause}
}

func (e *AuthError) Error() string { return e.Reason }

// Unwrap exposes ErrUnauthenticated and the cause.
func (e *AuthError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrUnauthenticated}
	}
	return []error{ErrUnauthenticated, e.Cause}
}

// Is matches errcode.ErrUnauthenticated (ErrUnauthenticated and the cause
// are matched through Unwrap).
func (e *AuthError) Is(target error) bool {
	return target == errcode.ErrUnauthenticated
}

// As fills an *errcode.Error target with the UNAUTHENTICATED code and the
// safe reason.
func (e *AuthError) As(target any) bool {
	if t, ok := target.(**errcode.Error); ok {
		*t = &errcode.Error{Code: errcode.Unauthenticated, Message: e.Reason}
		return true
	}
	return false
}
