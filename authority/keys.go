package authority

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// DevKeyFile is the name of the dev signing key in the data folder.
const DevKeyFile = "envelope-dev.key"

// ErrNoDevKey: the data folder holds no dev signing key (the server makes
// it on its first start in that folder).
var ErrNoDevKey = errors.New("no dev signing key")

// LoadDevKey returns the dev signing key kept in dataDir without ever
// creating one: `turngate token` must sign with the key the server in that
// folder verifies with, never with a fresh one the server does not know.
func LoadDevKey(dataDir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dataDir, DevKeyFile)
	key, err := readDevKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoDevKey, dataDir)
	}
	return key, err
}

// LoadOrCreateDevKey returns the dev signing key kept in
// dataDir/envelope-dev.key (PKCS#8 PEM, mode 0600), creating dataDir (0700)
// and the key on first use. The server and `turngate token` (another
// process) share it, so processes racing to create it must end with the
// same key: each writes a complete candidate to a temporary file and
// hard-links it into place, which fails when the key already exists, and
// everyone then reads the file that won. A key file readable by group or
// others is refused rather than used.
func LoadOrCreateDevKey(dataDir string) (ed25519.PrivateKey, error) {
	if dataDir == "" {
		return nil, errors.New("authority: dev key needs a data folder")
	}
	path := filepath.Join(dataDir, DevKeyFile)
	key, err := readDevKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev key: %w", err)
	}
	if err := createDevKey(dataDir, path); err != nil {
		return nil, err
	}
	return readDevKey(path)
}

// createDevKey writes a fresh key to path unless a key is already there.
func createDevKey(dataDir, path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("dev key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("dev key: %w", err)
	}
	// CreateTemp makes the file 0600.
	tmp, err := os.CreateTemp(dataDir, "."+DevKeyFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("dev key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dev key: %w", err)
	}
	// The key appears complete or not at all, and never replaces one.
	switch err := os.Link(tmp.Name(), path); {
	case err == nil, errors.Is(err, fs.ErrExist):
	default:
		// No hard links here: an exclusive create instead. A reader
		// racing this write may see a partial file and fail; rerunning
		// finds the complete key.
		if werr := writeExclusive(path, tmp.Name()); werr != nil && !errors.Is(werr, fs.ErrExist) {
			return fmt.Errorf("dev key: %w", werr)
		}
	}
	syncDir(dataDir)
	return nil
}

func writeExclusive(path, from string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a new directory entry durable, best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

func readDevKey(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("dev key %s: mode %04o lets others read it; chmod 600 it or remove it", path, info.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := parsePEM(raw, "PRIVATE KEY", x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("dev key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("dev key %s: not an Ed25519 key", path)
	}
	return priv, nil
}

// LoadPublicKeyPEM reads the platform's Ed25519 public key from a PKIX
// ("PUBLIC KEY") PEM file.
func LoadPublicKeyPEM(path string) (ed25519.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKeyPEM(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

// ParsePublicKeyPEM parses an Ed25519 public key in PKIX PEM.
func ParsePublicKeyPEM(raw []byte) (ed25519.PublicKey, error) {
	k, err := parsePEM(raw, "PUBLIC KEY", x509.ParsePKIXPublicKey)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an Ed25519 public key")
	}
	return pub, nil
}

// MarshalPublicKeyPEM encodes an Ed25519 public key as PKIX PEM.
func MarshalPublicKeyPEM(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// parsePEM decodes the one PEM block of type typ in raw with parse.
func parsePEM(raw []byte, typ string, parse func([]byte) (any, error)) (any, error) {
	block, rest := pem.Decode(raw)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != typ {
		return nil, fmt.Errorf("PEM block %q, want %q", block.Type, typ)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("data after the PEM block")
	}
	return parse(block.Bytes)
}
