package authority

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxLeeway bounds VerifierConfig.Leeway: clock skew, not a grace period.
const MaxLeeway = 5 * time.Minute

// maxEnvelopeBytes bounds the envelope text parsed at all.
const maxEnvelopeBytes = 8 << 10

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	Issuer    string
	Audience  string
	PublicKey ed25519.PublicKey // EdDSA envelopes
	// Keys, instead of PublicKey, picks the key of each envelope from an
	// identity provider's key set (JWKS) by the kid its header must carry
	// (see KeySet). Envelopes may then be EdDSA, RS256 or ES256, each
	// under a key of its own type; HMAC and none never.
	Keys   *KeySet
	Leeway time.Duration // clock skew allowance, at most MaxLeeway
	// MaxLifetime, when positive, refuses an envelope whose exp lies
	// further than it from its iat (without iat: from now, within the
	// leeway), so a leaked envelope cannot serve for months. Zero leaves
	// the lifetime to the signer.
	MaxLifetime time.Duration
	Now         func() time.Time // for tests; nil = time.Now
}

// Verifier checks identity envelopes. It is safe for concurrent use.
type Verifier struct {
	issuer   string
	audience string
	key      ed25519.PublicKey
	keys     *KeySet
	leeway   time.Duration
	lifetime time.Duration
	now      func() time.Time
	methods  []string
	parser   *jwt.Parser

	// verified remembers envelopes that passed, until they expire: the
	// same envelope arrives on every request of a session, and checking
	// its signature again costs more than the rest of an acceptance's Go
	// work. Only an exact, already verified token string hits; expiry is
	// checked on every hit, and with a key set, the set's version: an
	// envelope remembered under keys since changed is checked again, so
	// it outlives its key no longer than the set's next read.
	mu       sync.Mutex
	verified map[string]verifiedEnvelope
}

type verifiedEnvelope struct {
	id      Identity
	expires time.Time // exp + leeway
	keys    uint64    // the key set's version it verified under
}

// maxVerified bounds the cache; it is emptied when full.
const maxVerified = 10000

// NewVerifier returns a Verifier for cfg. Issuer, Audience and an Ed25519
// PublicKey are required; Leeway must lie in [0, MaxLeeway].
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("authority: verifier needs an issuer")
	case cfg.Audience == "":
		return nil, errors.New("authority: verifier needs an audience")
	case cfg.Keys == nil && len(cfg.PublicKey) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("authority: verifier needs an Ed25519 public key of %d bytes, got %d", ed25519.PublicKeySize, len(cfg.PublicKey))
	case cfg.Leeway < 0 || cfg.Leeway > MaxLeeway:
		return nil, fmt.Errorf("authority: leeway %v outside [0, %v]", cfg.Leeway, MaxLeeway)
	case cfg.MaxLifetime < 0:
		return nil, fmt.Errorf("authority: negative maximum lifetime %v", cfg.MaxLifetime)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	methods := []string{jwt.SigningMethodEdDSA.Alg()}
	if cfg.Keys != nil {
		methods = append(methods, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())
	}
	return &Verifier{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		key:      append(ed25519.PublicKey(nil), cfg.PublicKey...),
		keys:     cfg.Keys,
		leeway:   cfg.Leeway,
		lifetime: cfg.MaxLifetime,
		now:      now,
		methods:  methods,
		// The library checks the algorithm and the signature; the claims
		// are checked in Verify, each failure with its own reason.
		parser: jwt.NewParser(
			jwt.WithValidMethods(methods),
			jwt.WithStrictDecoding(),
			jwt.WithoutClaimsValidation(),
		),
	}, nil
}

// envelopeClaims are the claims an envelope is read for.
type envelopeClaims struct {
	jwt.RegisteredClaims
	Email         string `json:"email"`
	EmailVerified any    `json:"email_verified"`
	Name          string `json:"name"`
}

// Verify checks an envelope and returns the identity it asserts. It
// accepts only EdDSA signatures under the configured key (alg none, HS*
// and every other algorithm are rejected) — or, with a key set, EdDSA,
// RS256 or ES256 under the set's key its kid names —, the configured
// issuer and audience, a required exp, nbf and iat when present (all
// within the leeway), a lifetime within MaxLifetime when one is set,
// email_verified exactly true (not "true"), a non-empty sub and a plain
// email address. The email comes back trimmed and lowercased, the
// name flattened by FlattenName. Every failure is an *AuthError.
func (v *Verifier) Verify(token string) (Identity, error) {
	id, _, err := v.VerifyUntil(token)
	return id, err
}

// VerifyUntil is Verify that also says until when the envelope counts:
// its exp plus the leeway.
func (v *Verifier) VerifyUntil(token string) (Identity, time.Time, error) {
	if token == "" {
		return Identity{}, time.Time{}, unauthenticated(ReasonMissing, nil)
	}
	if len(token) > maxEnvelopeBytes {
		return Identity{}, time.Time{}, unauthenticated(ReasonMalformed, errors.New("envelope too large"))
	}
	if !compactSerialization(token) {
		return Identity{}, time.Time{}, unauthenticated(ReasonMalformed, errors.New("envelope has a character outside base64url and '.'"))
	}
	v.mu.Lock()
	hit, ok := v.verified[token]
	v.mu.Unlock()
	stale := ok && v.keys != nil && hit.keys != v.keys.Version()
	if ok && !stale {
		if v.now().Before(hit.expires) {
			return hit.id, hit.expires, nil
		}
		return Identity{}, time.Time{}, unauthenticated(ReasonExpired, nil)
	}
	id, exp, keys, err := v.verify(token)
	if err != nil {
		if stale {
			// The keys changed since, and it verifies no longer.
			v.mu.Lock()
			delete(v.verified, token)
			v.mu.Unlock()
		}
		return Identity{}, time.Time{}, err
	}
	v.mu.Lock()
	if v.verified == nil || len(v.verified) >= maxVerified {
		v.verified = make(map[string]verifiedEnvelope)
	}
	v.verified[token] = verifiedEnvelope{id: id, expires: exp, keys: keys}
	v.mu.Unlock()
	return id, exp, nil
}

// verify checks an envelope in full and returns the identity, the
// instant from which it counts as expired and the key set's version it
// verified under (0 without a key set).
func (v *Verifier) verify(token string) (Identity, time.Time, uint64, error) {
	var c envelopeClaims
	var version uint64
	tok, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if v.keys != nil {
			// The key set's key named by the envelope's kid, which must
			// be there: trying every key of the set would accept an
			// envelope no key claims.
			kid, present := t.Header["kid"]
			switch s, ok := kid.(string); {
			case !present || (ok && s == ""):
				return nil, unauthenticated(ReasonNoKeyID, nil)
			case !ok:
				return nil, unauthenticated(ReasonMalformed, errors.New("kid is not a string"))
			}
			key, ver, err := v.keys.key(kid.(string), t.Method.Alg())
			version = ver
			return key, err
		}
		// WithValidMethods has checked the alg name; insist on the
		// implementation too.
		if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return v.key, nil
	})
	if err != nil {
		return Identity{}, time.Time{}, 0, v.parseFailure(tok, err)
	}
	fail := func(reason string) (Identity, time.Time, uint64, error) {
		return Identity{}, time.Time{}, 0, unauthenticated(reason, nil)
	}
	if !tok.Valid {
		return fail(ReasonSignature)
	}
	if err := v.checkTimes(&c.RegisteredClaims); err != nil {
		return Identity{}, time.Time{}, 0, err
	}
	if c.Issuer != v.issuer {
		return fail(ReasonIssuer)
	}
	if !v.audienceMatches(c.Audience) {
		return fail(ReasonAudience)
	}
	switch {
	case strings.TrimSpace(c.Subject) == "":
		return fail(ReasonNoSubject)
	case !validSubject(c.Subject):
		return fail(ReasonSubject)
	}
	if verified, ok := c.EmailVerified.(bool); !ok || !verified {
		return fail(ReasonEmailNotVerified)
	}
	email, ok := normalizeEmail(c.Email)
	if !ok {
		return fail(ReasonEmailInvalid)
	}
	return Identity{Subject: c.Subject, Email: email, DisplayName: FlattenName(c.Name)}, c.ExpiresAt.Add(v.leeway), version, nil
}

// compactSerialization reports whether token holds only the characters of
// a compact JWT: base64url without padding, and dots. Go's base64 skips CR
// and LF even when strict, so without this check a valid envelope with a
// line break in its signature verified too: a second spelling of one
// envelope, and another entry in the memory of verified envelopes.
func compactSerialization(token string) bool {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// maxNumericDate is the last second of year 9999.
var maxNumericDate = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()

// checkTimes applies exp (required), nbf and iat (when present), each
// within the leeway. As in jwt, an envelope is expired from exp on.
//
// Each must lie in 1970..9999: jwt reads a date as float seconds and
// converts it to int64 unchecked, so an nbf or iat of 1e300 or 2^63,
// meant to lie in the future, became a date in the distant past and passed.
func (v *Verifier) checkTimes(c *jwt.RegisteredClaims) error {
	for _, d := range []*jwt.NumericDate{c.ExpiresAt, c.NotBefore, c.IssuedAt} {
		if d != nil && (d.Unix() < 0 || d.Unix() > maxNumericDate) {
			return unauthenticated(ReasonMalformed, errors.New("date claim outside 1970..9999"))
		}
	}
	now := v.now()
	switch {
	case c.ExpiresAt == nil:
		return unauthenticated(ReasonNoExpiry, nil)
	case !now.Before(c.ExpiresAt.Add(v.leeway)):
		return unauthenticated(ReasonExpired, nil)
	case c.NotBefore != nil && now.Before(c.NotBefore.Add(-v.leeway)):
		return unauthenticated(ReasonNotYetValid, nil)
	case c.IssuedAt != nil && now.Before(c.IssuedAt.Add(-v.leeway)):
		return unauthenticated(ReasonIssuedInFuture, nil)
	case v.lifetime > 0 && c.IssuedAt != nil && c.ExpiresAt.Sub(c.IssuedAt.Time) > v.lifetime:
		return unauthenticated(ReasonLifetime, nil)
	case v.lifetime > 0 && c.IssuedAt == nil && c.ExpiresAt.Sub(now) > v.lifetime+v.leeway:
		return unauthenticated(ReasonLifetime, nil)
	}
	return nil
}

func (v *Verifier) audienceMatches(aud jwt.ClaimStrings) bool {
	for _, a := range aud {
		if a == v.audience {
			return true
		}
	}
	return false
}

// parseFailure maps a jwt parse error to a reason.
func (v *Verifier) parseFailure(tok *jwt.Token, err error) *AuthError {
	var ae *AuthError
	switch {
	case errors.As(err, &ae):
		// The key lookup's own verdict: no kid, unknown key, a key of
		// another algorithm.
		return ae
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthenticated(ReasonMalformed, err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg jwt does not know, or one the key function refused.
		return unauthenticated(ReasonAlgorithm, err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// jwt says so of an alg outside the accepted ones, too.
		if tok != nil && tok.Method != nil && !slices.Contains(v.methods, tok.Method.Alg()) {
			return unauthenticated(ReasonAlgorithm, err)
		}
		return unauthenticated(ReasonSignature, err)
	default:
		return unauthenticated(ReasonMalformed, err)
	}
}
