package server_test

import (
	"context"
	"crypto/ed25519"
	"os"
	"testing"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// otherKeySigner signs with a key the server does not trust.
func otherKeySigner(t *testing.T, iss, aud string) *authority.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return authority.NewSigner(iss, aud, priv)
}

type roomRef struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Kind      string `json:"kind"`
	PublicKey string `json:"publicKey"`
	Channel   string `json:"channel"`
	Head      int64  `json:"head"`
}

// rooms lists the caller's rooms by title.
func rooms(t *testing.T, c *gqlclient.Client) map[string]roomRef {
	t.Helper()
	var out struct {
		Conversations struct {
			Edges []struct{ Node roomRef } `json:"edges"`
		} `json:"conversations"`
	}
	if err := c.Do(context.Background(), `{ conversations { edges { node { id title kind publicKey channel head } } } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]roomRef{}
	for _, e := range out.Conversations.Edges {
		m[e.Node.Title] = e.Node
	}
	return m
}

const (
	alice   = "alice@example.com"
	bob     = "bob@example.com"
	mallory = "mallory@example.com"
)
