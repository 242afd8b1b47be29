package authority_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
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

// claims are a valid envelope's claims for email, issued now for ttl.
func claims(email string, ttl time.Duration) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "https://idp.example", "aud": "turngate", "sub": "idp|" + email, "email": email, "email_verified": true,
		"name": "Someone", "iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	}
}

// key is the provider's private key of kid.
func (p *provider) key(kid string) ed25519.PrivateKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[kid]
}

// signAs signs c with key under method, with kid in the header unless it
// is empty.
func signAs(t *testing.T, kid string, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwksSetup is a provider publishing k1, and a verifier on its key set
// with the default timings (a key set read at once on an unknown kid, at
// most once a second), stopped when the test ends.
func jwksSetup(t *testing.T, cfg authority.VerifierConfig) (*provider, *authority.KeySet, *authority.Verifier) {
	t.Helper()
	p := &provider{keys: map[string]ed25519.PrivateKey{}}
	p.add(t, "k1")
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	keys := authority.NewKeySet(authority.JWKSConfig{URL: srv.URL})
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keys.Stop)
	cfg.Issuer, cfg.Audience, cfg.Keys = "https://idp.example", "turngate", keys
	v, err := authority.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, keys, v
}

// TestJWKSKeyLeavesTheSet: once the provider withdraws a key and the set
// is read again, envelopes of that key stop verifying — those already
// verified and remembered too — and the refusal says the key is unknown.
func TestJWKSKeyLeavesTheSet(t *testing.T) {
	t.Parallel()
	p, _, v := jwksSetup(t, authority.VerifierConfig{})
	old := p.sign(t, "k1", "ada@example.com", time.Hour)
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("an envelope of the published key: %v", err)
	}
	p.add(t, "k2")
	p.remove("k1")
	// The first envelope of k2 reads the set again: k1 is gone from it.
	if _, err := v.Verify(p.sign(t, "k2", "bob@example.com", time.Hour)); err != nil {
		t.Fatalf("an envelope of the new key: %v", err)
	}
	if _, err := v.Verify(old); reasonOf(err) != authority.ReasonUnknownKey {
		t.Fatalf("a remembered envelope of a withdrawn key: %v, want %q", err, authority.ReasonUnknownKey)
	}
	if _, err := v.Verify(p.sign(t, "k1", "carol@example.com", time.Hour)); reasonOf(err) != authority.ReasonUnknownKey {
		t.Fatalf("a new envelope of a withdrawn key: %v, want %q", err, authority.ReasonUnknownKey)
	}
}

// TestJWKSKeyLeavesOnTheRefresh: with no new kid to prompt a read, the
// periodic refresh alone ends a withdrawn key: the staleness is bounded
// by JWKSConfig.Refresh.
func TestJWKSKeyLeavesOnTheRefresh(t *testing.T) {
	t.Parallel()
	p := &provider{keys: map[string]ed25519.PrivateKey{}}
	p.add(t, "k1")
	srv := httptest.NewServer(p)
	defer srv.Close()
	keys := authority.NewKeySet(authority.JWKSConfig{URL: srv.URL, Refresh: 20 * time.Millisecond})
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer keys.Stop()
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: "https://idp.example", Audience: "turngate", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	old := p.sign(t, "k1", "ada@example.com", time.Hour)
	if _, err := v.Verify(old); err != nil {
		t.Fatal(err)
	}
	p.add(t, "k2")
	p.remove("k1")
	eventually(t, "the withdrawn key stops verifying", func() bool {
		_, err := v.Verify(old)
		return reasonOf(err) == authority.ReasonUnknownKey
	})
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("waited 10 s for %s", what)
		case <-tick.C:
		}
	}
}

// TestJWKSNewKeyRightAfterAnUnknownKID: an invented kid has just made the
// server read the set; the provider then rotates, and the first envelope
// of the new key is accepted — it waits for the next read (at most a
// second away), it is not refused.
func TestJWKSNewKeyRightAfterAnUnknownKID(t *testing.T) {
	t.Parallel()
	p, _, v := jwksSetup(t, authority.VerifierConfig{})
	forged := withKID(t, p.sign(t, "k1", "eve@example.com", time.Hour), "nope")
	if _, err := v.Verify(forged); reasonOf(err) != authority.ReasonUnknownKey {
		t.Fatalf("an invented kid: %v, want %q", err, authority.ReasonUnknownKey)
	}
	p.add(t, "k2")
	if id, err := v.Verify(p.sign(t, "k2", "bob@example.com", time.Hour)); err != nil || id.Email != "bob@example.com" {
		t.Fatalf("the first envelope of the rotated key: %+v, %v", id, err)
	}
}

// TestJWKSReadIsShared: many envelopes with unknown kids at once wait for
// one read of the set, not one each.
func TestJWKSReadIsShared(t *testing.T) {
	t.Parallel()
	p := &provider{keys: map[string]ed25519.PrivateKey{}}
	p.add(t, "k1")
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	var gated atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gated.Load() {
			<-gate
		}
		p.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer release() // before the server closes, which waits for its handlers
	keys := authority.NewKeySet(authority.JWKSConfig{URL: srv.URL})
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer keys.Stop()
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: "https://idp.example", Audience: "turngate", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	gated.Store(true)
	before := p.reads.Load()
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		forged := withKID(t, p.sign(t, "k1", "eve@example.com", time.Hour), fmt.Sprintf("nope-%d", i))
		go func() { _, err := v.Verify(forged); errs <- err }()
	}
	eventually(t, "every envelope waiting for the one read", func() bool { return keys.Waiting() == n })
	release()
	for range n {
		if err := <-errs; reasonOf(err) != authority.ReasonUnknownKey {
			t.Fatalf("an invented kid: %v, want %q", err, authority.ReasonUnknownKey)
		}
	}
	if reads := p.reads.Load() - before; reads != 1 {
		t.Fatalf("%d envelopes with unknown kids read the set %d times, want once", n, reads)
	}
}

// TestJWKSRefusals: each refusal of an envelope checked against a key set
// names the check that failed, and never the token or the kid.
func TestJWKSRefusals(t *testing.T) {
	t.Parallel()
	p, _, v := jwksSetup(t, authority.VerifierConfig{MaxLifetime: 24 * time.Hour})
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k1 := p.key("k1")
	good := claims("ada@example.com", time.Hour)
	tests := []struct {
		name   string
		token  string
		reason string
	}{
		{"valid", signAs(t, "k1", jwt.SigningMethodEdDSA, k1, good), ""},
		{"lifetime of exactly the maximum", signAs(t, "k1", jwt.SigningMethodEdDSA, k1, claims("ada@example.com", 24*time.Hour)), ""},
		{"no kid", signAs(t, "", jwt.SigningMethodEdDSA, k1, good), authority.ReasonNoKeyID},
		{"unknown kid", withKID(t, signAs(t, "k1", jwt.SigningMethodEdDSA, k1, good), "k-unknown-secret"), authority.ReasonUnknownKey},
		{"ES256 under an Ed25519 key", signAs(t, "k1", jwt.SigningMethodES256, ec, good), authority.ReasonKeyMismatch},
		{"HS256", signAs(t, "k1", jwt.SigningMethodHS256, []byte("secret"), good), authority.ReasonAlgorithm},
		{"lifetime too long", signAs(t, "k1", jwt.SigningMethodEdDSA, k1, claims("ada@example.com", 24*time.Hour+time.Second)), authority.ReasonLifetime},
		{"expired", signAs(t, "k1", jwt.SigningMethodEdDSA, k1, claims("ada@example.com", -time.Hour)), authority.ReasonExpired},
		{"wrong signature", tamper(t, signAs(t, "k1", jwt.SigningMethodEdDSA, k1, good)), authority.ReasonSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(tt.token)
			if reasonOf(err) != tt.reason {
				t.Fatalf("Verify: %v, want %q", err, tt.reason)
			}
			if err != nil && (strings.Contains(err.Error(), tt.token) || strings.Contains(err.Error(), "k-unknown-secret")) {
				t.Fatalf("the refusal %q echoes the envelope", err)
			}
		})
	}
}

// tamper flips a bit of token's claims, keeping its header and signature.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := splitDots(token)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["email"] = "mallory@example.com"
	raw, _ = json.Marshal(c)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
}

func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestJWKSKeyTypes: a key set may hold Ed25519, RSA and P-256 keys, each
// verifying envelopes of its own algorithm only; keys the server cannot
// use safely are left out of the set, so envelopes naming them are signed
// by an unknown key: RSA under 2048 bits, keys for encryption, and two
// keys under one kid.
func TestJWKSKeyTypes(t *testing.T) {
	t.Parallel()
	b64 := base64.RawURLEncoding.EncodeToString
	edPub, edKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaJWK := func(kid string, k *rsa.PrivateKey) map[string]string {
		return map[string]string{"kty": "RSA", "kid": kid, "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	}
	ecPoint, err := ecKey.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	set := []map[string]string{
		{"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(edPub)},
		rsaJWK("rsa", rsaKey),
		{"kty": "EC", "crv": "P-256", "kid": "ec", "use": "sig", "x": b64(ecPoint[1:33]), "y": b64(ecPoint[33:])},
		rsaJWK("weak", weak),
		{"kty": "OKP", "crv": "Ed25519", "kid": "enc", "use": "enc", "x": b64(edPub)},
		{"kty": "OKP", "crv": "Ed25519", "kid": "twice", "x": b64(edPub)},
		rsaJWK("twice", rsaKey),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": set})
	}))
	defer srv.Close()
	keys := authority.NewKeySet(authority.JWKSConfig{URL: srv.URL})
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer keys.Stop()
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: "https://idp.example", Audience: "turngate", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	good := claims("ada@example.com", time.Hour)
	tests := []struct {
		name   string
		token  string
		reason string
	}{
		{"EdDSA", signAs(t, "ed", jwt.SigningMethodEdDSA, edKey, good), ""},
		{"RS256", signAs(t, "rsa", jwt.SigningMethodRS256, rsaKey, good), ""},
		{"ES256", signAs(t, "ec", jwt.SigningMethodES256, ecKey, good), ""},
		{"RS256 under the Ed25519 key", signAs(t, "ed", jwt.SigningMethodRS256, rsaKey, good), authority.ReasonKeyMismatch},
		{"ES256 under the RSA key", signAs(t, "rsa", jwt.SigningMethodES256, ecKey, good), authority.ReasonKeyMismatch},
		{"RS256 by another key", signAs(t, "rsa", jwt.SigningMethodRS256, weak, good), authority.ReasonSignature},
		{"a 1024-bit RSA key", signAs(t, "weak", jwt.SigningMethodRS256, weak, good), authority.ReasonUnknownKey},
		{"a key for encryption", signAs(t, "enc", jwt.SigningMethodEdDSA, edKey, good), authority.ReasonUnknownKey},
		{"two keys under one kid", signAs(t, "twice", jwt.SigningMethodEdDSA, edKey, good), authority.ReasonUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := v.Verify(tt.token); reasonOf(err) != tt.reason {
				t.Fatalf("Verify: %v, want %q", err, tt.reason)
			}
		})
	}
}
