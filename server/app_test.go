package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// harness is one in-process server on a loopback port, wired exactly as
// `turngate serve` wires it, on a database of its own.
type harness struct {
	app    *App
	base   string // http://127.0.0.1:port
	signer *authority.Signer
	cfg    Config
}

func newHarness(t *testing.T, tweak func(*Config)) *harness {
	t.Helper()
	cfg := testConfig(filepath.Join(t.TempDir(), "data"), dbtest.NewDB(t), "test-"+t.Name())
	if tweak != nil {
		tweak(&cfg)
	}
	return startHarness(t, cfg)
}

// testConfig is a test replica's configuration: dev mode with the demo,
// on a free port, with its data in dataDir and its database at dbURL.
func testConfig(dataDir, dbURL, replica string) Config {
	return Config{
		Addr:           "127.0.0.1:0",
		DataDir:        dataDir,
		DatabaseURL:    dbURL,
		IdentityHeader: "X-Turngate-Identity",
		EnvelopeIssuer: devIssuer,
		EnvelopeAud:    devAudience,
		Demo:           true,
		ModelPace:      0,
		MaxTextLen:     2000,
		LeaseTTL:       30 * time.Second,
		Replica:        replica,
	}
}

// startHarness starts the server for cfg, stopped at cleanup; its log is
// discarded, or warnings go to stderr under -v.
func startHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return startHarnessLog(t, cfg, log)
}

// startHarnessLog is startHarness with the server's log going to log.
func startHarnessLog(t testing.TB, cfg Config, log *slog.Logger) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("new app: %v", err)
	}
	if err := app.Listen(); err != nil {
		cancel()
		app.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		app.Close()
	})
	key, err := authority.LoadOrCreateDevKey(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{app: app, base: "http://" + app.Addr(), signer: authority.NewSigner(cfg.EnvelopeIssuer, cfg.EnvelopeAud, key), cfg: cfg}
}

// client returns a GraphQL client carrying email's dev envelope.
func (h *harness) client(t testing.TB, email string) *gqlclient.Client {
	t.Helper()
	tok, err := mintDev(h.signer, email, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return h.clientWithToken(tok)
}

func (h *harness) clientWithToken(tok string) *gqlclient.Client {
	hdr := http.Header{}
	if tok != "" {
		hdr.Set(h.cfg.IdentityHeader, tok)
	}
	return &gqlclient.Client{URL: h.base + "/graphql", Header: hdr, HTTP: httpClient}
}

// httpClient keeps enough idle connections for concurrent tests and
// benchmarks (the default keeps two per host).
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}

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
