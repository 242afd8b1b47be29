package authority

import (
	"net/http"
	"strings"
)

// DefaultHeader is the envelope header unless configured otherwise.
const DefaultHeader = "X-Turngate-Identity"

// Middleware verifies the envelope in header (DefaultHeader when empty) on
// every request, WebSocket upgrades included, and records the outcome in
// the request context, replacing anything a handler before it put there.
// It never rejects a request itself:
//
//   - no header (or an empty one): the request proceeds without identity,
//     so /healthz and GraphiQL work and RequireIdentity answers "missing
//     identity envelope";
//   - a valid envelope: the request carries its Identity;
//   - anything else (an invalid envelope, or the header more than once):
//     the request proceeds without identity and AuthErrorFromContext and
//     RequireIdentity give the precise reason.
//
// Nothing but this header is consulted: not the body, the query string or
// a WebSocket connection_init payload.
func Middleware(v *Verifier, header string) func(http.Handler) http.Handler {
	if v == nil {
		panic("authority: Middleware needs a Verifier")
	}
	if header == "" {
		header = DefaultHeader
	}
	header = http.CanonicalHeaderKey(header)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			var values []string
			for _, s := range r.Header[header] {
				if s = strings.TrimSpace(s); s != "" {
					values = append(values, s)
				}
			}
			switch len(values) {
			case 0:
				ctx = newContextWithAuthError(ctx, nil)
			case 1:
				if id, until, err := v.VerifyUntil(values[0]); err != nil {
					ctx = newContextWithAuthError(ctx, err)
				} else {
					ctx = newContextWithEnvelope(ctx, id, until)
				}
			default:
				// Two envelopes, even equal ones, mean something between
				// the platform and us added one: trust neither.
				ctx = newContextWithAuthError(ctx, unauthenticated(ReasonAmbiguous, nil))
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
