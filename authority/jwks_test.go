package authority_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turngate/turngate/authority"
)

// provider is a local identity provider: a JWKS endpoint whose keys the
// test rotates, counting how often it is read.
type provider struct {
	mu    sync.Mutex
	keys  map[string]ed25519.PrivateKey
	order []string
	reads atomic.Int64
}

func (p *provider) add(t *testing.T, kid string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = priv
	p.order = append([]string{kid}, p.order...)
}

func (p *provider) remove(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, k := range p.order {
		if k == kid {
			p.order = append(p.order[:i:i], p.order[i+1:]...)
		}
	}
}

func (p *provider) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.reads.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for _, kid := range p.order {
		pub := p.keys[kid].Public().(ed25519.PublicKey)
		set.Keys = append(set.Keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
			"kid": kid, "x": base64.RawURLEncoding.EncodeToString(pub)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(set)
}

// sign is an envelope for email signed with kid's key, valid for ttl.
func (p *provider) sign(t *testing.T, kid, email string, ttl time.Duration) string {
	t.Helper()
	p.mu.Lock()
	priv := p.keys[kid]
	p.mu.Unlock()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": "https://idp.example", "aud": "turngate", "sub": "idp|" + email, "email": email, "email_verified": true,
		"name": "Someone", "iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWKSRotation: envelopes are verified with the provider's key of
// their kid. After the provider rotates (a new key first, the old one
// still published), envelopes signed by the new key are accepted at once
// — an unknown kid reads the set again — and those of the old key until
// they expire; once the old key is withdrawn, an envelope already
// verified still counts until its exp. A kid the provider never had is
// refused, and a burst of such kids reads the set at most once per
// interval.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	p := &provider{keys: map[string]ed25519.PrivateKey{}}
	p.add(t, "k1")
	srv := httptest.NewServer(p)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err := authority.JWKS(ctx, authority.JWKSConfig{URL: srv.URL, UnknownKIDEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: "https://idp.example", Audience: "turngate", Keys: keys, Leeway: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	old := p.sign(t, "k1", "ada@example.com", time.Hour)
	if id, err := v.Verify(old); err != nil || id.Email != "ada@example.com" {
		t.Fatalf("an envelope of the published key: %v, %v", id, err)
	}

	p.add(t, "k2") // rotation: k2 signs from now on, k1 still published
	fresh := p.sign(t, "k2", "bob@example.com", time.Hour)
	if _, err := v.Verify(fresh); err != nil {
		t.Fatalf("an envelope of the new key after rotation: %v", err)
	}
	if _, err := v.Verify(p.sign(t, "k1", "carol@example.com", time.Hour)); err != nil {
		t.Fatalf("an old-key envelope during the overlap: %v", err)
	}

	p.remove("k1")
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("a verified old-key envelope before its exp: %v", err)
	}

	readsBefore := p.reads.Load()
	for range 20 {
		forged := p.sign(t, "k2", "eve@example.com", time.Hour)
		forged = withKID(t, forged, "nope")
		var ae *authority.AuthError
		if _, err := v.Verify(forged); !errors.As(err, &ae) {
			t.Fatalf("an envelope with an unknown kid: %v, want an AuthError", err)
		}
	}
	if n := p.reads.Load() - readsBefore; n > 1 {
		t.Fatalf("20 unknown kids read the key set %d times, want at most once per interval", n)
	}
}

// withKID re-signs nothing: it swaps the kid in the header, so the
// signature no longer matches and the kid is one the provider never had.
func withKID(t *testing.T, token, kid string) string {
	t.Helper()
	parts := splitDots(token)
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	h["kid"] = kid
	raw, _ = json.Marshal(h)
	return base64.RawURLEncoding.EncodeToString(raw) + "." + parts[1] + "." + parts[2]
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
