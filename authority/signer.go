package authority

import (
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signer mints envelopes: dev mode's stand-in for the platform, and tests'.
type Signer struct {
	issuer, audience string
	key              ed25519.PrivateKey
	// Now is the clock Mint stamps iat and exp from; nil = time.Now. Set
	// it before the Signer is shared.
	Now func() time.Time
}

// NewSigner returns a signer for issuer and audience with key.
func NewSigner(issuer, audience string, key ed25519.PrivateKey) *Signer {
	return &Signer{issuer: issuer, audience: audience, key: key}
}

// Mint signs an envelope for id, valid for ttl from now: sub, email,
// email_verified=true, name (when not empty), iss, aud, iat and exp. The
// identity is signed as given; the verifier normalizes it.
func (s *Signer) Mint(id Identity, ttl time.Duration) (string, error) {
	if id.Subject == "" || id.Email == "" {
		return "", errors.New("authority: mint needs a subject and an email")
	}
	if ttl <= 0 {
		return "", errors.New("authority: mint needs a positive ttl")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now()
	claims := map[string]any{
		"sub": id.Subject, "email": id.Email, "email_verified": true,
		"iss": s.issuer, "aud": s.audience, "iat": t.Unix(), "exp": t.Add(ttl).Unix(),
	}
	if id.DisplayName != "" {
		claims["name"] = id.DisplayName
	}
	return s.MintClaims(claims)
}

// MintClaims signs exactly the claims given, with no defaults: for tests
// of bad envelopes.
func (s *Signer) MintClaims(claims map[string]any) (string, error) {
	if len(s.key) != ed25519.PrivateKeySize {
		return "", errors.New("authority: signer has no Ed25519 private key")
	}
	return jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims(claims)).SignedString(s.key)
}
