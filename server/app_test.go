package server_test

import (
	"crypto/ed25519"
	"os"
	"testing"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/e2etest"
)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m)) }

// otherKeySigner signs with a key the server does not trust.
func otherKeySigner(t *testing.T, iss, aud string) *authority.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return authority.NewSigner(iss, aud, priv)
}

const (
	alice   = "alice@example.com"
	bob     = "bob@example.com"
	mallory = "mallory@example.com"
)
