package authority

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/turngate/turngate/internal/startstop"
)

// JWKSConfig is where an identity provider publishes its signing keys and
// how often they are read again.
type JWKSConfig struct {
	URL string
	// Refresh is how often the set is read again regardless (default
	// DefaultJWKSRefresh). It bounds how long a key the provider withdrew
	// keeps verifying: envelopes already verified are checked again
	// whenever a read changes the set.
	Refresh time.Duration
	// UnknownKIDEvery spaces the reads that envelopes naming a kid the set
	// does not hold cause (default a second), so invented kids cannot make
	// the server hammer the provider.
	UnknownKIDEvery time.Duration
	// Timeout bounds one read (default 10 s).
	Timeout time.Duration
	// Client reads the set (default http.DefaultClient).
	Client *http.Client
	// Log records failed reads (default slog.Default()).
	Log *slog.Logger
}

// DefaultJWKSRefresh is how often a key set is read when nothing asks
// sooner.
const DefaultJWKSRefresh = 5 * time.Minute

const (
	// maxUnknownKIDWait: an envelope of an unknown kid waits for the next
	// read when it is due within this, and is refused at once otherwise.
	maxUnknownKIDWait = time.Second
	// maxJWKSBytes bounds the key set document read.
	maxJWKSBytes = 1 << 20
	// minRSABits is the smallest RSA modulus a key set may use.
	minRSABits = 2048
)

// KeySet is an identity provider's key set (JWKS): the public keys it
// signs envelopes with, each named by its kid, read from its jwks_uri.
//
// It is read when it starts (a server unable to verify anyone does not
// start), again every Refresh, and at once when an envelope names a kid
// it does not hold — the first envelope of a rotated-in key is accepted,
// not refused until the next scheduled read. Those reads are at most one
// per UnknownKIDEvery: an envelope whose read is due within a second
// waits for it, later than that it is refused as signed by an unknown key.
// Every envelope waiting shares the one read, in flight or due. A read
// that fails keeps the keys of the last read that succeeded.
//
// Its version changes whenever a read changes the keys, so a Verifier
// checks again the envelopes it remembered under an older version: a key
// the provider withdrew stops verifying at the read that no longer finds
// it, remembered envelopes included.
type KeySet struct {
	startstop.BaseStartStop
	cfg  JWKSConfig
	wake chan struct{} // an envelope asks for a read; buffered, one slot

	mu      sync.Mutex
	keys    map[string]setKey
	version uint64
	running bool      // the refresh loop runs and will serve next
	asked   time.Time // when the last read an unknown kid asked for started
	next    *keyRead  // the read an unknown kid asked for, not yet started
	current *keyRead  // the read in flight
	waiting int       // envelopes waiting for next or current
}

// setKey is a key of the set: the one algorithm it verifies and the key.
type setKey struct {
	alg string
	key crypto.PublicKey
}

// keyRead is one read of the set, which envelopes wait for.
type keyRead struct{ done chan struct{} }

// NewKeySet returns the key set at cfg.URL; Start reads it.
func NewKeySet(cfg JWKSConfig) *KeySet {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultJWKSRefresh
	}
	if cfg.UnknownKIDEvery <= 0 {
		cfg.UnknownKIDEvery = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &KeySet{cfg: cfg, wake: make(chan struct{}, 1)}
}

// JWKS starts the key set at cfg.URL; it is read again until ctx ends.
func JWKS(ctx context.Context, cfg JWKSConfig) (*KeySet, error) {
	s := NewKeySet(cfg)
	if err := s.Start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Start reads the set, which must succeed, then keeps it fresh until Stop
// or until ctx ends.
func (s *KeySet) Start(ctx context.Context) error {
	ctx, ok, stopped := s.StartInit(ctx)
	if !ok {
		return errors.New("authority: key set started twice")
	}
	if err := s.read(ctx); err != nil {
		stopped()
		return fmt.Errorf("identity provider keys at %s: %w", s.cfg.URL, err)
	}
	s.mu.Lock()
	if len(s.keys) == 0 {
		s.mu.Unlock()
		stopped()
		return fmt.Errorf("identity provider keys at %s: no signing key this server can use (Ed25519, RSA of %d bits or more, P-256, each with a kid)", s.cfg.URL, minRSABits)
	}
	s.running = true
	s.mu.Unlock()
	go func() {
		defer stopped()
		s.run(ctx)
	}()
	return nil
}

// run reads the set every Refresh, and when an unknown kid asks, no
// sooner than UnknownKIDEvery after the last read one asked for.
func (s *KeySet) run(ctx context.Context) {
	defer s.halt()
	every := time.NewTimer(s.cfg.Refresh)
	defer every.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		case <-s.wake:
			s.mu.Lock()
			asked := s.next != nil
			wait := time.Until(s.asked.Add(s.cfg.UnknownKIDEvery))
			s.mu.Unlock()
			if !asked {
				continue // a scheduled read took the request along
			}
			if wait > 0 {
				slot := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					slot.Stop()
					return
				case <-slot.C:
				}
			}
			s.mu.Lock()
			s.asked = time.Now()
			s.mu.Unlock()
		}
		if err := s.read(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "identity provider keys not read; the last keys read stay in use", "url", s.cfg.URL, "error", err)
		}
		every.Reset(s.cfg.Refresh)
	}
}

// halt ends the refresh loop: envelopes waiting for a read that will not
// come are answered with the keys at hand.
func (s *KeySet) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	if s.next != nil {
		close(s.next.done)
		s.next = nil
	}
}

// read reads the set once, on behalf of the envelopes waiting for the
// read asked for, if any, and of those that join while it is in flight.
func (s *KeySet) read(ctx context.Context) error {
	s.mu.Lock()
	r := s.next
	s.next = nil
	if r == nil {
		r = &keyRead{done: make(chan struct{})}
	}
	s.current = r
	s.mu.Unlock()

	keys, err := s.fetch(ctx)

	s.mu.Lock()
	if err == nil && !sameKeys(s.keys, keys) {
		s.keys = keys
		s.version++
	}
	s.current = nil
	s.mu.Unlock()
	close(r.done)
	return err
}

// Version changes whenever a read changes the keys.
func (s *KeySet) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// key returns the set's key named kid for an envelope signed with alg,
// and the version it was found in. A kid the set does not hold waits for
// a read (see KeySet); failures are *AuthErrors naming the check.
func (s *KeySet) key(kid, alg string) (crypto.PublicKey, uint64, error) {
	s.mu.Lock()
	k, ok := s.keys[kid]
	if !ok {
		r := s.current
		if r == nil {
			r = s.next
		}
		if r == nil && s.running && time.Until(s.asked.Add(s.cfg.UnknownKIDEvery)) <= maxUnknownKIDWait {
			r = &keyRead{done: make(chan struct{})}
			s.next = r
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
		if r != nil {
			s.waiting++
			s.mu.Unlock()
			<-r.done
			s.mu.Lock()
			s.waiting--
			k, ok = s.keys[kid]
		}
	}
	version := s.version
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, 0, unauthenticated(ReasonUnknownKey, nil)
	case k.alg != alg:
		return nil, 0, unauthenticated(ReasonKeyMismatch, fmt.Errorf("the key is for %s, the envelope says %s", k.alg, alg))
	}
	return k.key, version, nil
}

// fetch reads and parses the set.
func (s *KeySet) fetch(ctx context.Context) (map[string]setKey, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxJWKSBytes {
		return nil, fmt.Errorf("key set larger than %d bytes", maxJWKSBytes)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	keys := make(map[string]setKey, len(set.Keys))
	dup := map[string]bool{}
	for _, j := range set.Keys {
		k, ok := j.parse()
		if !ok {
			continue // not a signing key this server can use
		}
		if _, seen := keys[j.Kid]; seen || dup[j.Kid] {
			// Two keys under one kid: which one signed is anyone's
			// guess, so neither verifies.
			delete(keys, j.Kid)
			dup[j.Kid] = true
			continue
		}
		keys[j.Kid] = k
	}
	return keys, nil
}

// jwk is a JSON Web Key (RFC 7517) as a key set publishes it.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// parse reads a public signing key with a kid: Ed25519 (EdDSA), RSA of
// minRSABits or more (RS256), P-256 (ES256). Anything else is skipped, as
// RFC 7517 asks of keys a reader does not understand.
func (j jwk) parse() (setKey, bool) {
	if j.Kid == "" || (j.Use != "" && j.Use != "sig") {
		return setKey{}, false
	}
	b64 := base64.RawURLEncoding
	var k setKey
	switch {
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		x, err := b64.DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return setKey{}, false
		}
		k = setKey{alg: "EdDSA", key: ed25519.PublicKey(x)}
	case j.Kty == "RSA":
		n, err1 := b64.DecodeString(j.N)
		e, err2 := b64.DecodeString(j.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return setKey{}, false
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
			return setKey{}, false
		}
		k = setKey{alg: "RS256", key: pub}
	case j.Kty == "EC" && j.Crv == "P-256":
		x, err1 := b64.DecodeString(j.X)
		y, err2 := b64.DecodeString(j.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return setKey{}, false
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return setKey{}, false // not a point of the curve
		}
		k = setKey{alg: "ES256", key: pub}
	default:
		return setKey{}, false
	}
	if j.Alg != "" && j.Alg != k.alg {
		return setKey{}, false // a key meant for another algorithm
	}
	return k, true
}

// sameKeys reports whether two reads hold the same keys.
func sameKeys(a, b map[string]setKey) bool {
	if len(a) != len(b) {
		return false
	}
	for kid, ka := range a {
		kb, ok := b[kid]
		if !ok || ka.alg != kb.alg {
			return false
		}
		eq, ok := ka.key.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !eq.Equal(kb.key) {
			return false
		}
	}
	return true
}
