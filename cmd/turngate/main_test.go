package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/server"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// TestHelpAndVersion: `turngate help` lists the commands, --version names
// the binary, every command answers --help without running, and an
// unknown command or flag is a clear error.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var out strings.Builder
	if err := run(ctx, []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "turngate migrate") {
		t.Fatalf("help: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"--version"}, &out); err != nil || !strings.HasPrefix(out.String(), "turngate ") {
		t.Fatalf("--version: %v %q", err, out.String())
	}
	for _, cmd := range []string{"serve", "migrate", "token", "chat"} {
		if err := run(ctx, []string{cmd, "--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s --help = %v, want the usage (flag.ErrHelp)", cmd, err)
		}
	}
	if err := run(ctx, []string{"serve", "--no-such-flag"}, io.Discard); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("an unknown flag = %v", err)
	}
	if err := run(ctx, []string{"frobnicate"}, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Errorf("an unknown command = %v", err)
	}
}

// TestServeRefusesAModelRouteItCannotServe: an openai route without an
// endpoint or without a model refuses to start, saying what to set; a
// complete one, and the builtin, pass the check.
func TestServeRefusesAModelRouteItCannotServe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{AgentRoute: "openai"}, "TURNGATE_OPENAI_BASE_URL"},
		{server.Config{AgentRoute: "openai", OpenAI: gateway.OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1"}}, "TURNGATE_OPENAI_MODEL"},
		{server.Config{AgentRoute: "anthropic"}, "want builtin, openai"},
	} {
		err := tc.cfg.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want an error naming %s", tc.cfg.AgentRoute, err, tc.want)
		}
		// serve refuses before it starts anything (no database, no port).
		if err := serve(context.Background(), tc.cfg, nil, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve with route %q = %v, want the refusal", tc.cfg.AgentRoute, err)
		}
	}
	for _, ok := range []server.Config{{}, {AgentRoute: "builtin"}, {AgentRoute: "openai:llama3", OpenAI: gateway.OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1"}},
		{AgentRoute: "openai", OpenAI: gateway.OpenAIConfig{APIKey: "k", Model: "gpt"}}} {
		if err := ok.Check(); err != nil {
			t.Errorf("Check(%q) = %v", ok.AgentRoute, err)
		}
	}
}

// TestServeRefusesAPoolerWithoutADirectURL: transaction pooling without
// a direct URL (for LISTEN and the migrations), or a pooler mode that is
// not one, refuses to start, saying what to set.
func TestServeRefusesAPoolerWithoutADirectURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{DBPooler: "transaction", DatabaseURL: "postgres://127.0.0.1:1/x"}, "TURNGATE_DIRECT_DATABASE_URL"},
		{server.Config{DBPooler: "statement", DatabaseURL: "postgres://127.0.0.1:1/x"}, "want transaction"},
	} {
		if err := serve(context.Background(), tc.cfg, nil, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve with pooler %q = %v, want the refusal naming %s", tc.cfg.DBPooler, err, tc.want)
		}
	}
	ok := server.Config{DBPooler: "transaction", DatabaseURL: "postgres://127.0.0.1:6432/x", DirectDatabaseURL: "postgres://127.0.0.1:5432/x"}
	if err := ok.Check(); err != nil {
		t.Errorf("Check(transaction pooling with a direct URL) = %v", err)
	}
}

// TestListenErrorSaysHowToMove: an address already in use says which
// setting picks another.
func TestListenErrorSaysHowToMove(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = net.Listen("tcp", taken.Addr().String())
	if err == nil {
		t.Fatal("listening twice on one address succeeded")
	}
	if got := listenError(err).Error(); !strings.Contains(got, "TURNGATE_ADDR") || !strings.Contains(got, "address already in use") {
		t.Errorf("listenError = %q, want it to name TURNGATE_ADDR", got)
	}
	if other := errors.New("permission denied"); listenError(other) != other {
		t.Errorf("listenError changed an error that is not EADDRINUSE")
	}
}
