package authority

import (
	"context"
	"fmt"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWKSConfig is where an identity provider publishes its signing keys and
// how often they are read again.
type JWKSConfig struct {
	URL string
	// Refresh is how often the key set is read again regardless (default
	// an hour); an envelope with a kid the set does not hold reads it at
	// once, at most once per UnknownKIDEvery (default 10 s), so forged
	// kids cannot make the server hammer the provider.
	Refresh         time.Duration
	UnknownKIDEvery time.Duration
}

// JWKS returns the key function of a provider's key set (keyfunc, the
// JWKS client golang-jwt's own documentation points to): keys chosen by
// kid, cached, refreshed on an unknown kid, rate-limited. The first read
// must succeed — a server does not start unable to verify anyone — and
// the refreshing stops with ctx.
func JWKS(ctx context.Context, cfg JWKSConfig) (jwt.Keyfunc, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Hour
	}
	if cfg.UnknownKIDEvery <= 0 {
		cfg.UnknownKIDEvery = 10 * time.Second
	}
	failFirst := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.URL}, keyfunc.Override{
		RefreshInterval:   cfg.Refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(cfg.UnknownKIDEvery), 1),
		// An unknown kid past the rate waits at most this for the next
		// refresh, then fails: a request never hangs on a forged kid.
		RateLimitWaitMax:          100 * time.Millisecond,
		HTTPTimeout:               10 * time.Second,
		NoErrorReturnFirstHTTPReq: &failFirst,
	})
	if err != nil {
		return nil, fmt.Errorf("identity provider keys at %s: %w", cfg.URL, err)
	}
	return kf.Keyfunc, nil
}
