package servertest

import (
	"context"
	"database/sql"
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
	"github.com/turngate/turngate/server"
)

// Harness is one server running in this process.
type Harness struct {
	App *server.App
	// Base is its address, http://127.0.0.1:port.
	Base string
	// Signer signs dev envelopes the server accepts.
	Signer *authority.Signer
	Config server.Config
	// DB is the server's database handle.
	DB *sql.DB
}

// New starts a server on a database of its own, in dev mode with the
// demo, its data in a temporary folder; tweak, when not nil, changes its
// configuration first. It stops at the test's cleanup.
func New(t testing.TB, tweak func(*server.Config)) *Harness {
	t.Helper()
	cfg := Config(filepath.Join(t.TempDir(), "data"), dbtest.NewDB(t), "test-"+t.Name())
	if tweak != nil {
		tweak(&cfg)
	}
	return Start(t, cfg)
}

// Config is a test replica's configuration: dev mode with the demo, on a
// free loopback port, with its data in dataDir and its database at dbURL.
func Config(dataDir, dbURL, replica string) server.Config {
	return server.Config{
		Addr:           "127.0.0.1:0",
		DataDir:        dataDir,
		DatabaseURL:    dbURL,
		IdentityHeader: authority.DefaultHeader,
		EnvelopeIssuer: server.DevIssuer,
		EnvelopeAud:    server.DevAudience,
		Demo:           true,
		ModelPace:      0,
		MaxTextLen:     2000,
		LeaseTTL:       30 * time.Second,
		Replica:        replica,
		// Most tests never run a script: their run_code workers start
		// when one does.
		Limits: server.Limits{SandboxLazy: true},
	}
}

// Start starts the server for cfg, stopped at cleanup; its log is
// discarded, or its warnings go to stderr under -v.
func Start(t testing.TB, cfg server.Config) *Harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return StartLog(t, cfg, log)
}

// StartLog is Start with the server's log going to log.
func StartLog(t testing.TB, cfg server.Config, log *slog.Logger) *Harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.New(ctx, cfg, log)
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
	return &Harness{App: app, Base: "http://" + app.Addr(), Signer: authority.NewSigner(cfg.EnvelopeIssuer, cfg.EnvelopeAud, key),
		Config: cfg, DB: app.DB()}
}

// Client returns a GraphQL client carrying email's dev envelope, valid
// for an hour.
func (h *Harness) Client(t testing.TB, email string) *gqlclient.Client {
	t.Helper()
	tok, err := server.MintDev(h.Signer, email, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return h.ClientWithToken(tok)
}

// ClientWithToken returns a GraphQL client carrying tok as its envelope
// (none when tok is empty).
func (h *Harness) ClientWithToken(tok string) *gqlclient.Client {
	hdr := http.Header{}
	if tok != "" {
		hdr.Set(h.Config.IdentityHeader, tok)
	}
	return &gqlclient.Client{URL: h.Base + "/graphql", Header: hdr, HTTP: HTTPClient}
}

// Dial opens a graphql-transport-ws connection to the server carrying
// c's identity header, and nothing else of c's.
func (h *Harness) Dial(t testing.TB, ctx context.Context, c *gqlclient.Client) *gqlclient.Conn {
	t.Helper()
	hdr := http.Header{}
	hdr.Set(h.Config.IdentityHeader, c.Header.Get(h.Config.IdentityHeader))
	conn, err := gqlclient.Dial(ctx, h.Base+"/graphql", hdr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// HTTPClient keeps enough idle connections for concurrent tests and
// benchmarks (the default keeps two per host).
var HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
