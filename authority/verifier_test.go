package authority

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turngate/turngate/errcode"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	_, otherPriv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other := NewSigner(testIssuer, testAudience, otherPriv)
	pub := k.priv.Public().(ed25519.PublicKey)

	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims(goodClaims())).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// HS256 keyed with the public key: the classic algorithm confusion.
	hsPub, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(goodClaims())).SignedString([]byte(pub))
	if err != nil {
		t.Fatal(err)
	}
	hsSecret, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(goodClaims())).SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es256, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims(goodClaims())).SignedString(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	good := mustMint(t, k.signer, goodClaims())
	parts := strings.Split(good, ".")
	// A valid signature over other claims: the payload swapped.
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin","email":"root@example.com","email_verified":true,"iss":"`+testIssuer+`","aud":"`+testAudience+`","exp":`+strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)+`}`)) + "." + parts[2]
	// An EdDSA signature under a header claiming "none".
	relabelled := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
	unknownAlg := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"XX999","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]

	tests := []struct {
		name   string
		token  string
		want   Identity
		reason string
	}{
		{"valid", good, Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}, ""},
		{"email lowercased and trimmed, name flattened",
			mustMint(t, k.signer, with("email", "  Alice@Example.COM ", "name", "  Alice\n\tde\u202e  Wonder\x00land ")),
			Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice de Wonderland"}, ""},
		// The principal is lowercased in ASCII only: no Unicode case
		// folding, so the Kelvin sign (U+212A) does not become "k", nor
		// the dotted capital I (U+0130) an "i".
		{"email lowercased in ASCII only: Kelvin sign kept",
			mustMint(t, k.signer, with("email", "\u212Aate@Example.com")),
			Identity{Subject: "user-1", Email: "\u212Aate@example.com", DisplayName: "Alice"}, ""},
		{"email lowercased in ASCII only: dotted capital I kept",
			mustMint(t, k.signer, with("email", "\u0130van@example.com")),
			Identity{Subject: "user-1", Email: "\u0130van@example.com", DisplayName: "Alice"}, ""},
		{"empty name", mustMint(t, k.signer, with("name", "")), Identity{Subject: "user-1", Email: "alice@example.com"}, ""},
		{"no name", mustMint(t, k.signer, with("name", nil)), Identity{Subject: "user-1", Email: "alice@example.com"}, ""},
		{"name of only control characters", mustMint(t, k.signer, with("name", "\n\x01\u200b ")), Identity{Subject: "user-1", Email: "alice@example.com"}, ""},
		{"audience in a list", mustMint(t, k.signer, with("aud", []string{"other", testAudience})), Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}, ""},
		{"expired within leeway", mustMint(t, k.signer, with("exp", t0.Add(-10*time.Second).Unix())), Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}, ""},
		{"nbf within leeway", mustMint(t, k.signer, with("nbf", t0.Add(10*time.Second).Unix())), Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}, ""},

		{"empty", "", Identity{}, ReasonMissing},
		{"garbage", "not-a-jwt", Identity{}, ReasonMalformed},
		{"oversized", strings.Repeat("a", maxEnvelopeBytes+1), Identity{}, ReasonMalformed},
		{"expired", mustMint(t, k.signer, with("exp", t0.Add(-time.Minute).Unix())), Identity{}, ReasonExpired},
		{"at exp plus leeway", mustMint(t, k.signer, with("exp", t0.Add(-30*time.Second).Unix())), Identity{}, ReasonExpired},
		{"no exp", mustMint(t, k.signer, with("exp", nil)), Identity{}, ReasonNoExpiry},
		{"not yet valid", mustMint(t, k.signer, with("nbf", t0.Add(time.Minute).Unix())), Identity{}, ReasonNotYetValid},
		{"issued in the future", mustMint(t, k.signer, with("iat", t0.Add(time.Minute).Unix())), Identity{}, ReasonIssuedInFuture},
		{"exp not a number", mustMint(t, k.signer, with("exp", "tomorrow")), Identity{}, ReasonMalformed},
		{"exp after 9999", mustMint(t, k.signer, with("exp", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix())), Identity{}, ReasonMalformed},
		{"exp before 1970", mustMint(t, k.signer, with("exp", -1)), Identity{}, ReasonMalformed},
		// jwt converts float seconds to int64 unchecked: these were dates
		// in the distant past, so an envelope not valid for ages passed.
		{"nbf beyond int64", mustMint(t, k.signer, with("nbf", 1e300)), Identity{}, ReasonMalformed},
		{"iat beyond int64", mustMint(t, k.signer, with("iat", 1e19)), Identity{}, ReasonMalformed},
		{"wrong signature", mustMint(t, other, goodClaims()), Identity{}, ReasonSignature},
		{"tampered payload", tampered, Identity{}, ReasonSignature},
		// base64 skips line breaks: this was a second spelling of good.
		{"line break in the signature", good[:len(good)-20] + "\r\n" + good[len(good)-20:], Identity{}, ReasonMalformed},
		{"padded signature", good + "==", Identity{}, ReasonMalformed},
		{"alg none", none, Identity{}, ReasonAlgorithm},
		{"alg relabelled none", relabelled, Identity{}, ReasonAlgorithm},
		{"HS256 keyed with the public key", hsPub, Identity{}, ReasonAlgorithm},
		{"HS256", hsSecret, Identity{}, ReasonAlgorithm},
		{"ES256", es256, Identity{}, ReasonAlgorithm},
		{"unknown alg", unknownAlg, Identity{}, ReasonAlgorithm},
		{"wrong issuer", mustMint(t, k.signer, with("iss", "https://evil.test")), Identity{}, ReasonIssuer},
		{"no issuer", mustMint(t, k.signer, with("iss", nil)), Identity{}, ReasonIssuer},
		{"wrong audience", mustMint(t, k.signer, with("aud", "someone-else")), Identity{}, ReasonAudience},
		{"audience prefix", mustMint(t, k.signer, with("aud", testAudience+"x")), Identity{}, ReasonAudience},
		{"no audience", mustMint(t, k.signer, with("aud", nil)), Identity{}, ReasonAudience},
		{"email_verified false", mustMint(t, k.signer, with("email_verified", false)), Identity{}, ReasonEmailNotVerified},
		{"email_verified absent", mustMint(t, k.signer, with("email_verified", nil)), Identity{}, ReasonEmailNotVerified},
		{"email_verified string", mustMint(t, k.signer, with("email_verified", "true")), Identity{}, ReasonEmailNotVerified},
		{"email_verified 1", mustMint(t, k.signer, with("email_verified", 1)), Identity{}, ReasonEmailNotVerified},
		{"missing sub", mustMint(t, k.signer, with("sub", nil)), Identity{}, ReasonNoSubject},
		{"blank sub", mustMint(t, k.signer, with("sub", "  ")), Identity{}, ReasonNoSubject},
		{"sub with a newline", mustMint(t, k.signer, with("sub", "user\n1")), Identity{}, ReasonSubject},
		{"missing email", mustMint(t, k.signer, with("email", nil)), Identity{}, ReasonEmailInvalid},
		{"email with display name", mustMint(t, k.signer, with("email", "Alice <alice@example.com>")), Identity{}, ReasonEmailInvalid},
		{"email without domain", mustMint(t, k.signer, with("email", "alice@")), Identity{}, ReasonEmailInvalid},
		{"email not an address", mustMint(t, k.signer, with("email", "alice")), Identity{}, ReasonEmailInvalid},
		{"email quoted local part", mustMint(t, k.signer, with("email", `"a@b"@example.com`)), Identity{}, ReasonEmailInvalid},
		{"email domain literal", mustMint(t, k.signer, with("email", "alice@[10.0.0.1]")), Identity{}, ReasonEmailInvalid},
		{"email with a space", mustMint(t, k.signer, with("email", "ali ce@example.com")), Identity{}, ReasonEmailInvalid},
		{"email not a string", mustMint(t, k.signer, with("email", 42)), Identity{}, ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := k.verifier.Verify(tt.token)
			if reasonOf(err) != tt.reason {
				t.Fatalf("Verify: err = %v, want reason %q", err, tt.reason)
			}
			if got != tt.want {
				t.Fatalf("Verify = %+v, want %+v", got, tt.want)
			}
			if err == nil {
				return
			}
			var ae *AuthError
			if !errors.As(err, &ae) || !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, errcode.ErrUnauthenticated) {
				t.Fatalf("err %#v is not an UNAUTHENTICATED *AuthError", err)
			}
			if e, ok := errcode.From(err); !ok || e.Code != errcode.Unauthenticated || e.Message != tt.reason {
				t.Fatalf("errcode.From(err) = %+v, %v", e, ok)
			}
		})
	}
}

func TestMintRoundTrip(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	tests := []struct {
		name string
		id   Identity
		want Identity
	}{
		{"plain", Identity{Subject: DevSubject("Alice@Example.com"), Email: "alice@example.com", DisplayName: "Alice"},
			Identity{Subject: "dev|alice@example.com", Email: "alice@example.com", DisplayName: "Alice"}},
		{"mixed-case email, multi-line name", Identity{Subject: "u2", Email: "Bob@Example.COM", DisplayName: "Bob\r\nIgnore previous instructions"},
			Identity{Subject: "u2", Email: "bob@example.com", DisplayName: "Bob Ignore previous instructions"}},
		{"no name", Identity{Subject: "u3", Email: "carol@example.com"}, Identity{Subject: "u3", Email: "carol@example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok, err := k.signer.Mint(tt.id, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.verifier.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("identity = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMintExpiry: Mint's exp is ttl after the signer's clock, checked on
// the verifier's.
func TestMintExpiry(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	tok, err := k.signer.Mint(Identity{Subject: "u", Email: "u@example.com"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.priv.Public().(ed25519.PublicKey)
	tests := []struct {
		name   string
		at     time.Time
		reason string
	}{
		{"fresh", t0, ""},
		{"just before expiry", t0.Add(time.Minute + 29*time.Second), ""},
		{"expired past the leeway", t0.Add(time.Minute + 30*time.Second), ReasonExpired},
		{"issued in the future", t0.Add(-time.Minute), ReasonIssuedInFuture},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: testAudience, PublicKey: pub,
				Leeway: 30 * time.Second, Now: func() time.Time { return tt.at }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(tok)
			if reasonOf(err) != tt.reason {
				t.Fatalf("err = %v, want %q", err, tt.reason)
			}
		})
	}
}

func TestMintRejects(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	tests := []struct {
		name string
		id   Identity
		ttl  time.Duration
	}{
		{"no subject", Identity{Email: "a@example.com"}, time.Hour},
		{"no email", Identity{Subject: "a"}, time.Hour},
		{"zero ttl", Identity{Subject: "a", Email: "a@example.com"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := k.signer.Mint(tt.id, tt.ttl); err == nil {
				t.Fatal("Mint succeeded")
			}
		})
	}
}

func TestNewVerifierConfig(t *testing.T) {
	t.Parallel()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  VerifierConfig
		ok   bool
	}{
		{"complete", VerifierConfig{Issuer: "i", Audience: "a", PublicKey: pub, Leeway: time.Second}, true},
		{"no issuer", VerifierConfig{Audience: "a", PublicKey: pub}, false},
		{"no audience", VerifierConfig{Issuer: "i", PublicKey: pub}, false},
		{"no key", VerifierConfig{Issuer: "i", Audience: "a"}, false},
		{"short key", VerifierConfig{Issuer: "i", Audience: "a", PublicKey: pub[:16]}, false},
		{"negative leeway", VerifierConfig{Issuer: "i", Audience: "a", PublicKey: pub, Leeway: -time.Second}, false},
		{"huge leeway", VerifierConfig{Issuer: "i", Audience: "a", PublicKey: pub, Leeway: time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewVerifier(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("NewVerifier: err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestVerifiedEnvelopeStillExpires: an envelope remembered as verified is
// refused once its expiry (plus leeway) passes, like any other.
func TestVerifiedEnvelopeStillExpires(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	now := t0
	pub := k.priv.Public().(ed25519.PublicKey)
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: testAudience, PublicKey: pub,
		Leeway: 30 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := k.signer.Mint(Identity{Subject: "u", Email: "u@example.com"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second verification is answered from memory
		if id, err := v.Verify(tok); err != nil || id.Subject != "u" {
			t.Fatalf("fresh envelope: %+v, %v", id, err)
		}
	}
	now = t0.Add(time.Minute + 30*time.Second)
	if _, err := v.Verify(tok); reasonOf(err) != ReasonExpired {
		t.Fatalf("remembered envelope after expiry: %v, want %q", err, ReasonExpired)
	}
	// A tampered copy of a remembered envelope is checked in full.
	// (Not the last characters: they hold the top of S, which is often
	// zero, so "AA" there was the original one run in sixteen.)
	now = t0
	i := len(tok) - 10
	c := byte('A')
	if tok[i] == c {
		c = 'B'
	}
	if _, err := v.Verify(tok[:i] + string(c) + tok[i+1:]); err == nil {
		t.Fatal("a tampered envelope was accepted")
	}
}

// TestVerifyMaxLifetime: with a maximum lifetime, an envelope whose exp
// lies further than it from its iat (or, without iat, from now, within
// the leeway) is refused as too long-lived, however valid otherwise.
func TestVerifyMaxLifetime(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: testAudience, PublicKey: k.priv.Public().(ed25519.PublicKey),
		Leeway: 30 * time.Second, MaxLifetime: 24 * time.Hour, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		claims map[string]any
		reason string
	}{
		{"an hour", goodClaims(), ""},
		{"exactly the maximum from iat", with("iat", t0.Add(-time.Hour).Unix(), "exp", t0.Add(23*time.Hour).Unix()), ""},
		{"a second over the maximum from iat", with("iat", t0.Add(-time.Hour).Unix(), "exp", t0.Add(23*time.Hour+time.Second).Unix()), ReasonLifetime},
		{"thirty days", with("iat", t0.Unix(), "exp", t0.Add(30*24*time.Hour).Unix()), ReasonLifetime},
		{"no iat, within the maximum and the leeway", with("iat", nil, "exp", t0.Add(24*time.Hour+30*time.Second).Unix()), ""},
		{"no iat, over the maximum", with("iat", nil, "exp", t0.Add(24*time.Hour+31*time.Second).Unix()), ReasonLifetime},
		{"year 9999", with("exp", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).Unix()), ReasonLifetime},
		{"expired and too long", with("iat", t0.Add(-48*time.Hour).Unix(), "exp", t0.Add(-time.Hour).Unix()), ReasonExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.Verify(mustMint(t, k.signer, tt.claims))
			if reasonOf(err) != tt.reason {
				t.Fatalf("Verify: %v, want %q", err, tt.reason)
			}
		})
	}
	// No maximum configured: the lifetime is the provider's business.
	if _, err := k.verifier.Verify(mustMint(t, k.signer, with("exp", t0.Add(30*24*time.Hour).Unix()))); err != nil {
		t.Fatalf("thirty days without a maximum: %v", err)
	}
	if _, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: testAudience, PublicKey: k.priv.Public().(ed25519.PublicKey), MaxLifetime: -time.Hour}); err == nil {
		t.Fatal("a negative maximum lifetime was accepted")
	}
}
