package authority

import (
	"crypto/ed25519"
	"maps"
	"testing"
	"time"
)

const (
	testIssuer   = "https://platform.test"
	testAudience = "turngate-test"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

type kit struct {
	priv     ed25519.PrivateKey
	signer   *Signer
	verifier *Verifier
}

// newKit returns a signer and a verifier sharing a fresh key, both on the
// fixed clock t0, with 30s of leeway.
func newKit(t *testing.T) kit {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{
		Issuer: testIssuer, Audience: testAudience, PublicKey: pub,
		Leeway: 30 * time.Second, Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSigner(testIssuer, testAudience, priv)
	s.Now = func() time.Time { return t0 }
	return kit{priv: priv, signer: s, verifier: v}
}

// goodClaims are the claims of a valid envelope at t0.
func goodClaims() map[string]any {
	return map[string]any{
		"sub": "user-1", "email": "alice@example.com", "email_verified": true, "name": "Alice",
		"iss": testIssuer, "aud": testAudience,
		"iat": t0.Add(-time.Minute).Unix(), "exp": t0.Add(time.Hour).Unix(),
	}
}

// with returns goodClaims with k set to v, or removed when v is nil.
func with(kv ...any) map[string]any {
	c := maps.Clone(goodClaims())
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(c, k)
		} else {
			c[k] = kv[i+1]
		}
	}
	return c
}

func mustMint(t *testing.T, s *Signer, claims map[string]any) string {
	t.Helper()
	tok, err := s.MintClaims(claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// reasonOf returns err's safe reason, or "" for nil.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
