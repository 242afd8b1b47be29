package authority

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestLoadOrCreateDevKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "data")
	first, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equal(second) {
		t.Fatal("second call returned another key")
	}
	if runtime.GOOS == "windows" {
		return
	}
	tests := []struct {
		name string
		path string
		want os.FileMode
	}{
		{"key file", filepath.Join(dir, DevKeyFile), 0o600},
		{"data folder", dir, 0o700},
	}
	for _, tt := range tests {
		info, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != tt.want {
			t.Errorf("%s: mode %04o, want %04o", tt.name, got, tt.want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("data folder holds %v, want only the key", entries)
	}
}

// TestLoadOrCreateDevKeyRace: callers racing to create the key all get
// the one that was written.
func TestLoadOrCreateDevKeyRace(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	const n = 10
	keys := make([]ed25519.PrivateKey, n)
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			keys[i], errs[i] = LoadOrCreateDevKey(dir)
		}()
	}
	start.Done()
	done.Wait()
	onDisk, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !keys[i].Equal(onDisk) {
			t.Fatalf("caller %d got a key other than the one on disk", i)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("data folder holds %v, want only the key", entries)
	}
}

func TestLoadOrCreateDevKeyBadFile(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	pubPEM := func() []byte {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := MarshalPublicKeyPEM(pub)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := func() []byte {
		dir := t.TempDir()
		if _, err := LoadOrCreateDevKey(dir); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, DevKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
	}{
		{"readable by others", good, 0o644},
		{"not PEM", []byte("hello"), 0o600},
		{"a public key", pubPEM(), 0o600},
		{"trailing data", append(bytes.Clone(good), "junk"...), 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, DevKeyFile)
			if err := os.WriteFile(path, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateDevKey(dir); err == nil {
				t.Fatal("bad key file accepted")
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, tt.content) {
				t.Fatal("bad key file was replaced")
			}
		})
	}
}

func TestLoadPublicKeyPEM(t *testing.T) {
	t.Parallel()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := MarshalPublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := LoadOrCreateDevKey(filepath.Join(dir, "dev")); err != nil {
		t.Fatal(err)
	}
	privPEM, err := os.ReadFile(filepath.Join(dir, "dev", DevKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content []byte
		ok      bool
	}{
		{"PKIX public key", pubPEM, true},
		{"private key", privPEM, false},
		{"not PEM", []byte("ssh-ed25519 AAAA"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "pub.pem")
			if err := os.WriteFile(path, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadPublicKeyPEM(path)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && !got.Equal(pub) {
				t.Fatal("another key")
			}
		})
	}
	if _, err := LoadPublicKeyPEM(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("absent file accepted")
	}
}

// TestDevKeyVerifies: an envelope minted with the dev key passes a
// verifier holding its public half, as between `turngate token` and the
// server.
func TestDevKeyVerifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenKey, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	serverKey, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: testAudience, PublicKey: serverKey.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewSigner(testIssuer, testAudience, tokenKey).Mint(Identity{Subject: DevSubject("alice@example.com"), Email: "alice@example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
}

// TestLoadDevKeyNeverCreates: LoadDevKey reads the key the server keeps
// and never makes one: in a folder without it, ErrNoDevKey, and still no
// key file; once the server's LoadOrCreateDevKey made it, the same key.
func TestLoadDevKeyNeverCreates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := LoadDevKey(dir); !errors.Is(err, ErrNoDevKey) {
		t.Fatalf("LoadDevKey of an empty folder = %v, want ErrNoDevKey", err)
	}
	if _, err := os.Stat(filepath.Join(dir, DevKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadDevKey left a key file: %v", err)
	}
	made, err := LoadOrCreateDevKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadDevKey(dir)
	if err != nil || !got.Equal(made) {
		t.Fatalf("LoadDevKey = %v, %v; want the server's key", got, err)
	}
}
