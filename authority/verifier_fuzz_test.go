package authority

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turngate/turngate/errcode"
)

// The fuzz targets' keys are fixed, so that a token in a committed corpus
// means the same on every run; their clock is t0, so it never expires.
var (
	fuzzKey      = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5e}, ed25519.SeedSize))
	fuzzOtherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x0f}, ed25519.SeedSize))
)

const fuzzLeeway = 30 * time.Second

// newFuzzKit is newKit with the fixed key fuzzKey.
func newFuzzKit(tb testing.TB) kit {
	tb.Helper()
	v, err := NewVerifier(VerifierConfig{
		Issuer: testIssuer, Audience: testAudience, PublicKey: fuzzKey.Public().(ed25519.PublicKey),
		Leeway: fuzzLeeway, Now: func() time.Time { return t0 },
	})
	if err != nil {
		tb.Fatal(err)
	}
	s := NewSigner(testIssuer, testAudience, fuzzKey)
	s.Now = func() time.Time { return t0 }
	return kit{priv: fuzzKey, signer: s, verifier: v}
}

func mintTB(tb testing.TB, s *Signer, claims map[string]any) string {
	tb.Helper()
	tok, err := s.MintClaims(claims)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// FuzzVerify: whatever the header carries, Verify either returns an
// identity for a token that an independent reading (assertVerdict) finds
// exactly valid under the configured key and claims, or an UNAUTHENTICATED
// *AuthError with a documented reason and no identity. Asking twice gives
// the same answer: the memory of verified envelopes changes no verdict.
//
// The committed corpus (testdata/fuzz/FuzzVerify) holds the inputs that do
// not depend on a key: empty, NUL bytes, invalid UTF-8, wrong segment
// counts, padding and alphabet variants, alg none, HS256, ES256, unknown
// algorithms, huge and negative numbers. The seeds below are signed here.
func FuzzVerify(f *testing.F) {
	k := newFuzzKit(f)
	other := NewSigner(testIssuer, testAudience, fuzzOtherKey)
	good := mintTB(f, k.signer, goodClaims())
	parts := strings.Split(good, ".")
	for _, tok := range []string{
		good,
		mintTB(f, k.signer, with("aud", []string{"other", testAudience}, "name", "Ålice\u202e\n")),
		mintTB(f, k.signer, with("exp", t0.Add(-time.Minute).Unix())),
		mintTB(f, k.signer, with("exp", t0.Add(-fuzzLeeway).Unix())),
		mintTB(f, k.signer, with("exp", 1e300)),
		mintTB(f, k.signer, with("exp", -1e300)),
		mintTB(f, k.signer, with("exp", math.MaxInt64)),
		mintTB(f, k.signer, with("exp", math.MinInt64)),
		mintTB(f, k.signer, with("exp", -1)),
		mintTB(f, k.signer, with("nbf", t0.Add(time.Hour).Unix())),
		mintTB(f, k.signer, with("email_verified", "true")),
		mintTB(f, k.signer, with("email", "Alice <alice@example.com>")),
		mintTB(f, k.signer, with("sub", "\x00")),
		mintTB(f, k.signer, with("iss", nil)),
		mintTB(f, other, goodClaims()),
		// The valid signature under other headers.
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2],
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","crit":["exp"]}`)) + "." + parts[1] + "." + parts[2],
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","alg":"none"}`)) + "." + parts[1] + "." + parts[2],
		// The valid token respelled.
		parts[0] + "." + parts[1] + "." + parts[2] + "==",
		parts[0] + "==." + parts[1] + "." + parts[2],
		strings.NewReplacer("-", "+", "_", "/").Replace(good),
		parts[0] + "." + parts[1] + "." + parts[2][:40] + "\n" + parts[2][40:],
		parts[0] + "." + parts[1] + "." + parts[2][:40] + "\r\n" + parts[2][40:],
		" " + good,
		good + ".",
		good + "." + parts[2],
		parts[0] + "." + parts[1] + ".",
		parts[0] + "." + parts[1],
		parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, ed25519.SignatureSize)),
	} {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, err := k.verifier.Verify(token)
		assertVerdict(t, token, id, err)
		again, err2 := k.verifier.Verify(token)
		if again != id || reasonOf(err2) != reasonOf(err) {
			t.Fatalf("Verify(%q) twice: %+v, %v then %+v, %v", token, id, err, again, err2)
		}
	})
}

// FuzzVerifyMutation: a valid token with one byte replaced, inserted or
// deleted never verifies, wherever the byte is (header, payload,
// signature, a separator) and whatever it is; the token itself still
// does, with the identity that was signed.
func FuzzVerifyMutation(f *testing.F) {
	k := newFuzzKit(f)
	tokens := []struct {
		token string
		want  Identity
	}{
		{mintTB(f, k.signer, goodClaims()), Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}},
		{mintTB(f, k.signer, with("email", " Bob@Example.COM", "name", "Bob\r\nthe builder", "aud", []string{testAudience, "x"})),
			Identity{Subject: "user-1", Email: "bob@example.com", DisplayName: "Bob the builder"}},
	}
	const (
		replace = iota
		insert
		remove
		ops
	)
	n := len(tokens[0].token)
	sig := strings.LastIndexByte(tokens[0].token, '.') + 1
	for _, seed := range []struct {
		op  uint8
		pos uint16
		b   byte
	}{
		{replace, 0, 'x'},
		{replace, 5, '.'},
		{replace, 40, 'A'},
		{replace, uint16(sig - 1), 'A'},
		{replace, uint16(sig), '-'},
		// The signature's last character carries 2 bits and 4 unused
		// ones: 'A' and 'B' decode alike unless decoding is strict.
		{replace, uint16(n - 1), 'B'},
		{replace, uint16(n - 1), 0},
		{replace, uint16(n - 1), 0xff},
		{insert, uint16(sig + 10), '\n'},
		{insert, uint16(sig + 10), '\r'},
		{insert, uint16(n), '='},
		{insert, uint16(n), '\n'},
		{insert, 0, ' '},
		{insert, uint16(sig), '.'},
		{remove, uint16(n - 1), 0},
		{remove, uint16(sig - 1), 0},
		{remove, 0, 0},
	} {
		f.Add(uint8(0), seed.op, seed.pos, seed.b)
		f.Add(uint8(1), seed.op, seed.pos, seed.b)
	}
	f.Fuzz(func(t *testing.T, which, op uint8, pos uint16, b byte) {
		tt := tokens[int(which)%len(tokens)]
		tok := tt.token
		var mutated string
		switch op % ops {
		case replace:
			i := int(pos) % len(tok)
			mutated = tok[:i] + string([]byte{b}) + tok[i+1:]
		case insert:
			i := int(pos) % (len(tok) + 1)
			mutated = tok[:i] + string([]byte{b}) + tok[i:]
		case remove:
			i := int(pos) % len(tok)
			mutated = tok[:i] + tok[i+1:]
		}
		id, err := k.verifier.Verify(mutated)
		assertVerdict(t, mutated, id, err)
		if mutated == tok {
			if err != nil || id != tt.want {
				t.Fatalf("the valid token: %+v, %v, want %+v", id, err, tt.want)
			}
			return
		}
		if err == nil {
			t.Fatalf("token with one byte changed (op %d at %d, %q) verified as %+v:\n%q", op%ops, pos, b, id, mutated)
		}
	})
}

// plainSubject and plainEmail are spellings every rule accepts, for the
// converse check of FuzzVerifyClaims.
var (
	plainSubject = regexp.MustCompile(`^[A-Za-z0-9|._-]{1,64}$`)
	plainEmail   = regexp.MustCompile(`^[a-z0-9._-]{1,32}@[a-z0-9-]{1,32}(\.[a-z0-9-]{1,16}){0,3}$`)
	// maxDate is the last second of year 9999, the latest date an
	// envelope may carry.
	maxDate = float64(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix())
)

// FuzzVerifyClaims: envelopes correctly signed with the configured key,
// carrying arbitrary claim values. Any that verifies carries exactly the
// identity it asserts and passes every rule (assertVerdict); conversely
// one whose claims plainly pass every rule verifies.
//
// nbf and iat are left out when 0.
func FuzzVerifyClaims(f *testing.F) {
	k := newFuzzKit(f)
	now := float64(t0.Unix())
	for _, s := range []struct {
		sub, email, name string
		verified         bool
		iss, aud         string
		exp, nbf, iat    float64
	}{
		{"user-1", "alice@example.com", "Alice", true, testIssuer, testAudience, now + 3600, 0, now - 60},
		{"user-1", "  Alice@Example.COM ", "  Alice\n\tde\u202e  Wonder\x00land ", true, testIssuer, testAudience, now + 3600, now, now},
		{"", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{" user-1", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user\x001", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-\xff", "alice@example.com", "\xff", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-1", "alice@\xffexample.com", "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-1", `"a@b"@example.com`, "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-1", "alice@[10.0.0.1]", "", true, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-1", "alice@example.com", "", false, testIssuer, testAudience, now + 3600, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer + "/", testAudience, now + 3600, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, strings.ToUpper(testAudience), now + 3600, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now - 30, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now - 29.5, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now - 29, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, maxDate, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, math.MaxInt64, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, -math.MaxInt64, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, 1e300, 0, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, now + 31, 0},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, 0, now + 31},
		{"user-1", "alice@example.com", "", true, testIssuer, testAudience, now + 3600, -1e300, 1e300},
	} {
		f.Add(s.sub, s.email, s.name, s.verified, s.iss, s.aud, s.exp, s.nbf, s.iat)
	}
	f.Fuzz(func(t *testing.T, sub, email, name string, verified bool, iss, aud string, exp, nbf, iat float64) {
		claims := map[string]any{"sub": sub, "email": email, "email_verified": verified, "iss": iss, "aud": aud, "exp": exp}
		if name != "" {
			claims["name"] = name
		}
		if nbf != 0 {
			claims["nbf"] = nbf
		}
		if iat != 0 {
			claims["iat"] = iat
		}
		tok, err := k.signer.MintClaims(claims)
		if err != nil {
			// NaN and ±Inf are not JSON.
			if math.IsNaN(exp) || math.IsInf(exp, 0) || math.IsNaN(nbf) || math.IsInf(nbf, 0) || math.IsNaN(iat) || math.IsInf(iat, 0) {
				t.Skip(err)
			}
			t.Fatal(err)
		}
		id, err := k.verifier.Verify(tok)
		assertVerdict(t, tok, id, err)
		plain := plainSubject.MatchString(sub) && plainEmail.MatchString(strings.ToLower(strings.TrimSpace(email))) &&
			verified && iss == testIssuer && aud == testAudience &&
			exp >= now+31 && exp <= maxDate && (nbf == 0 || 0 < nbf && nbf <= now) && (iat == 0 || 0 < iat && iat <= now)
		if plain && err != nil {
			t.Fatalf("plainly valid claims %v rejected: %v", claims, err)
		}
	})
}

// reasons are the documented rejection reasons.
var reasons = map[string]bool{
	ReasonMissing: true, ReasonAmbiguous: true, ReasonMalformed: true, ReasonAlgorithm: true,
	ReasonSignature: true, ReasonNoExpiry: true, ReasonExpired: true, ReasonNotYetValid: true,
	ReasonIssuedInFuture: true, ReasonIssuer: true, ReasonAudience: true, ReasonNoSubject: true,
	ReasonSubject: true, ReasonEmailNotVerified: true, ReasonEmailInvalid: true,
	ReasonNoKeyID: true, ReasonUnknownKey: true, ReasonKeyMismatch: true, ReasonLifetime: true,
}

// assertVerdict checks Verify's answer (id, err) for token against a
// reading of the token that shares no code with the verifier. A rejection
// must be an UNAUTHENTICATED *AuthError with a documented reason and no
// identity. An acceptance must be of a token in canonical compact form
// (three base64url segments, each the only spelling of its bytes) whose
// header says EdDSA, whose signature verifies under fuzzKey's public half,
// whose claims pass every rule at t0, and whose claims are the identity
// returned.
func assertVerdict(t *testing.T, token string, id Identity, err error) {
	t.Helper()
	if err != nil {
		var ae *AuthError
		e, ok := errcode.From(err)
		switch {
		case id != (Identity{}):
			t.Fatalf("Verify(%q) failed (%v) but returned %+v", token, err, id)
		case !errors.As(err, &ae) || !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, errcode.ErrUnauthenticated):
			t.Fatalf("Verify(%q): %#v is not an UNAUTHENTICATED *AuthError", token, err)
		case !reasons[err.Error()] || ae.Reason != err.Error():
			t.Fatalf("Verify(%q): undocumented reason %q", token, err.Error())
		case !ok || e.Code != errcode.Unauthenticated || e.Message != ae.Reason:
			t.Fatalf("Verify(%q): errcode.From = %+v, %v", token, e, ok)
		}
		return
	}

	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("Verify accepted %q, which has %d segments", token, len(parts))
	}
	var seg [3][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		if err != nil || base64.RawURLEncoding.EncodeToString(b) != p {
			t.Fatalf("Verify accepted %q, whose segment %d is not canonical base64url", token, i)
		}
		seg[i] = b
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(seg[0], &header); err != nil || header.Alg != jwt.SigningMethodEdDSA.Alg() {
		t.Fatalf("Verify accepted %q, whose header is %s", token, seg[0])
	}
	if !ed25519.Verify(fuzzKey.Public().(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), seg[2]) {
		t.Fatalf("Verify accepted %q, whose signature is not fuzzKey's", token)
	}

	var c map[string]any
	d := json.NewDecoder(bytes.NewReader(seg[1]))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		t.Fatalf("Verify accepted %q, whose payload %s is not a JSON object: %v", token, seg[1], err)
	}
	now := float64(t0.Unix())
	leeway := fuzzLeeway.Seconds()
	// seconds reads a NumericDate claim; absent is NaN, which no
	// comparison holds for.
	seconds := func(name string) (float64, bool) {
		v, ok := c[name]
		if !ok {
			return math.NaN(), false
		}
		n, isNum := v.(json.Number)
		if !isNum {
			t.Fatalf("Verify accepted %q, whose %s is %v", token, name, v)
		}
		x, err := n.Float64()
		if err != nil {
			t.Fatalf("Verify accepted %q, whose %s is %v", token, name, v)
		}
		return x, true
	}
	str := func(name string) string {
		s, ok := c[name].(string)
		if !ok {
			t.Fatalf("Verify accepted %q, whose %s is %v", token, name, c[name])
		}
		return s
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		if x, ok := seconds(name); ok && !(0 <= x && x < maxDate+1) {
			t.Fatalf("Verify accepted %q: %s %v lies outside 1970..9999", token, name, x)
		}
	}
	if exp, _ := seconds("exp"); !(exp+leeway > now) {
		t.Fatalf("Verify accepted %q: exp %v is not after t0 %v within the leeway", token, c["exp"], now)
	}
	if nbf, ok := seconds("nbf"); ok && nbf-leeway > now {
		t.Fatalf("Verify accepted %q: nbf %v lies in the future", token, nbf)
	}
	if iat, ok := seconds("iat"); ok && iat-leeway > now {
		t.Fatalf("Verify accepted %q: iat %v lies in the future", token, iat)
	}
	if iss := str("iss"); iss != testIssuer {
		t.Fatalf("Verify accepted %q: issuer %q", token, iss)
	}
	switch aud := c["aud"].(type) {
	case string:
		if aud != testAudience {
			t.Fatalf("Verify accepted %q: audience %q", token, aud)
		}
	case []any:
		found := false
		for _, a := range aud {
			found = found || a == testAudience
		}
		if !found {
			t.Fatalf("Verify accepted %q: audience %v", token, aud)
		}
	default:
		t.Fatalf("Verify accepted %q: audience %v", token, aud)
	}
	if c["email_verified"] != true {
		t.Fatalf("Verify accepted %q: email_verified %v", token, c["email_verified"])
	}
	sub := str("sub")
	if id.Subject != sub || sub == "" || strings.TrimSpace(sub) != sub || !utf8.ValidString(sub) {
		t.Fatalf("Verify accepted %q with subject %q as %q", token, sub, id.Subject)
	}
	email := str("email")
	if id.Email != strings.ToLower(strings.TrimSpace(email)) || strings.Count(id.Email, "@") != 1 {
		t.Fatalf("Verify accepted %q with email %q as %q", token, email, id.Email)
	}
	name := ""
	if _, ok := c["name"]; ok {
		name = str("name")
	}
	if id.DisplayName != FlattenName(name) {
		t.Fatalf("Verify accepted %q with name %q as %q", token, name, id.DisplayName)
	}
}
