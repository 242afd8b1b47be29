package authority

import (
	"context"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Identity is what a verified envelope says about the caller.
type Identity struct {
	Subject     string // platform user id ("sub")
	Email       string // lowercased, verified
	DisplayName string // "name" claim, flattened to one line; may be empty
}

// MaxDisplayNameRunes bounds a flattened display name.
const MaxDisplayNameRunes = 80

const (
	maxSubjectBytes = 256
	maxEmailBytes   = 254
)

// identityKey is the context key of the envelope state a request carries.
type identityKey struct{}

// envelopeState is what the middleware learned from a request's header:
// an identity, a verification failure, or (both zero) no envelope at all.
type envelopeState struct {
	id  Identity
	ok  bool
	err error
	// expires is when the verified envelope stops counting (exp plus the
	// verifier's leeway); zero when unknown.
	expires time.Time
}

// NewContextWithIdentity returns ctx carrying id as the verified caller.
// It replaces any identity or verification failure ctx carried.
func NewContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, envelopeState{id: id, ok: true})
}

// newContextWithAuthError returns ctx carrying no identity and err as the
// reason (nil: no envelope at all), replacing whatever ctx carried.
func newContextWithAuthError(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, identityKey{}, envelopeState{err: err})
}

// newContextWithEnvelope returns ctx carrying id, verified until expires.
func newContextWithEnvelope(ctx context.Context, id Identity, expires time.Time) context.Context {
	return context.WithValue(ctx, identityKey{}, envelopeState{id: id, ok: true, expires: expires})
}

// ExpiresFromContext returns when the verified envelope ctx carries stops
// counting: a stream opened under it ends then (UNAUTHENTICATED).
func ExpiresFromContext(ctx context.Context) (time.Time, bool) {
	s, _ := ctx.Value(identityKey{}).(envelopeState)
	return s.expires, s.ok && !s.expires.IsZero()
}

// ErrEnvelopeExpired is the UNAUTHENTICATED error of a stream whose
// envelope expired while it was open.
func ErrEnvelopeExpired() error { return unauthenticated(ReasonExpired, nil) }

// IdentityFromContext returns the verified caller ctx carries, if any.
func IdentityFromContext(ctx context.Context) (Identity, bool) {
	s, _ := ctx.Value(identityKey{}).(envelopeState)
	return s.id, s.ok
}

// AuthErrorFromContext returns why the request's envelope was rejected, or
// nil when it was accepted or absent.
func AuthErrorFromContext(ctx context.Context) error {
	s, _ := ctx.Value(identityKey{}).(envelopeState)
	return s.err
}

// RequireIdentity returns the verified caller, or an UNAUTHENTICATED
// *AuthError: "missing identity envelope" when the request had none, the
// precise verification failure when it had an invalid one.
func RequireIdentity(ctx context.Context) (Identity, error) {
	s, _ := ctx.Value(identityKey{}).(envelopeState)
	switch {
	case s.ok:
		return s.id, nil
	case s.err != nil:
		return Identity{}, s.err
	default:
		return Identity{}, unauthenticated(ReasonMissing, nil)
	}
}

// DevSubject is the platform user id of email in dev mode, so that a dev
// envelope minted for an email names the member seeded for it.
func DevSubject(email string) string {
	return "dev|" + LowerASCII(strings.TrimSpace(email))
}

// FlattenName makes a display name one bounded line: invalid UTF-8, control
// and invisible format characters (bidi overrides, zero-width characters
// and the like) are removed, every run of whitespace (line breaks
// included) becomes one space, the ends are trimmed, and at most
// MaxDisplayNameRunes runes are kept.
func FlattenName(s string) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			continue
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			continue
		}
		if space {
			if n+1 >= MaxDisplayNameRunes {
				break
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= MaxDisplayNameRunes {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// LowerASCII lowercases the ASCII letters of s and leaves every other
// rune as it is: an email principal is case-folded in ASCII only, so no
// Unicode folding can map a different address (one with the Kelvin sign
// U+212A, say) onto an ASCII member's.
func LowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// normalizeEmail trims and lowercases (ASCII only) email and reports whether it is a
// plain addr-spec: no display name, comment, quoting or domain literal.
func normalizeEmail(email string) (string, bool) {
	email = LowerASCII(strings.TrimSpace(email))
	if email == "" || len(email) > maxEmailBytes || !utf8.ValidString(email) {
		return "", false
	}
	for _, r := range email {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", false
		}
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email {
		return "", false
	}
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") ||
		strings.HasPrefix(domain, "[") || strings.HasPrefix(local, `"`) {
		return "", false
	}
	return email, true
}

// validSubject reports whether sub can name a platform user: bounded,
// valid UTF-8, no surrounding space, no control or format characters.
func validSubject(sub string) bool {
	if len(sub) > maxSubjectBytes || !utf8.ValidString(sub) || strings.TrimSpace(sub) != sub {
		return false
	}
	for _, r := range sub {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}
