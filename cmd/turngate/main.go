package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/turngate/turngate/server"

	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // --help printed the usage it asked for
		}
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, errorLine("turngate", err))
		os.Exit(1)
	}
}

// usage is `turngate help`.
const usage = `turngate is a durable chat-turn server for AI agents.

Usage:
  turngate [serve] [flags]   run the server (the default command)
  turngate migrate           apply the database migrations and exit
  turngate token --email E   print a dev identity envelope for E (dev mode)
  turngate chat [flags]      chat in a terminal, against a running server
  turngate admin ...         documents, members and agents (admin permissions)
  turngate version           print the version (also --version)
  turngate help              print this

Each command takes --help. Settings come from the environment; the
README's Configuration table lists every one.
`

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			fmt.Fprint(stdout, usage)
			return nil
		case "version", "-version", "--version":
			fmt.Fprintln(stdout, version())
			return nil
		}
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	cfg, err := server.ConfigFromEnv()
	if err != nil {
		return err
	}
	log, err := server.NewLogger(cfg, os.Stderr)
	if err != nil {
		return err
	}
	switch cmd {
	case "serve":
		return serve(ctx, cfg, args, stdout, log)
	case "migrate":
		return migrate(ctx, cfg, args, stdout, log)
	case "token":
		return token(cfg, args, stdout)
	case "chat":
		return chatCmd(ctx, cfg, args, os.Stdin, stdout, os.Stderr)
	case "admin":
		return adminCmd(ctx, cfg, args, stdout, os.Stderr)
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, token, chat, admin, version or help; see turngate help)", cmd)
	}
}

func serve(ctx context.Context, cfg server.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "HTTP listen address")
	fs.IntVar(&cfg.DBMaxConns, "db-max-conns", cfg.DBMaxConns, "database connection pool size (TURNGATE_DB_MAX_CONNS; default 64)")
	fs.StringVar(&cfg.DBPooler, "db-pooler", cfg.DBPooler, "transaction: DATABASE_URL goes through a pooler in transaction mode (TURNGATE_DB_POOLER; needs TURNGATE_DIRECT_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.DBMaxConns != 0 && cfg.DBMaxConns < 2 {
		return fmt.Errorf("--db-max-conns: want at least 2, got %d", cfg.DBMaxConns)
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	app, err := server.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	if err := app.Listen(); err != nil {
		return listenError(err)
	}
	fmt.Fprintf(stdout, "turngate is serving the chat at http://%s/ (GraphiQL at http://%s/graphiql/)\n", app.Addr(), app.Addr())
	if cfg.Dev() {
		tok, err := app.DevToken(demo.People[0].Email, min(24*time.Hour, cfg.EnvelopeLifetime()))
		if err == nil {
			fmt.Fprintf(stdout, "dev identity envelope for %s (header %s):\n%s\n", demo.People[0].Email, cfg.IdentityHeader, tok)
		}
	}
	return app.Serve(ctx)
}

// listenError says how to pick another address when the one asked for is
// taken (another make run, or anything else on 8080).
func listenError(err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: pick another address with TURNGATE_ADDR or --addr, e.g. TURNGATE_ADDR=127.0.0.1:8081", err)
	}
	return err
}

func migrate(ctx context.Context, cfg server.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	url := cfg.DatabaseURL
	if url == "" {
		pg, err := pgembed.Start(ctx, pgembed.Options{Dir: server.EmbeddedDir(cfg), Durable: true})
		if err != nil {
			return err
		}
		defer pg.Stop()
		if err := server.EnsureDatabase(ctx, pg.URL("postgres"), "turngate"); err != nil {
			return err
		}
		url = pg.URL("turngate")
	}
	if cfg.DirectDatabaseURL != "" {
		url = cfg.DirectDatabaseURL
	}
	if err := migrations.Apply(ctx, url); err != nil {
		return err
	}
	v, _ := migrations.Latest()
	fmt.Fprintf(stdout, "database at schema version %d\n", v)
	return nil
}

func token(cfg server.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	email := fs.String("email", "", "the demo member's email")
	ttl := fs.Duration("ttl", min(24*time.Hour, cfg.EnvelopeLifetime()), "how long the envelope is valid (at most TURNGATE_ENVELOPE_MAX_LIFETIME)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "the server's data folder, where its dev key is (TURNGATE_DATA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *email == "" {
		return errors.New("token: --email is required")
	}
	tok, err := devEnvelope(cfg, *email, *ttl)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// version is the binary's version from its build information: the module
// version (a tagged release, or "(devel)"), the commit and whether the
// tree was modified, and the Go release.
func version() string {
	v, rev, modified := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	out := "turngate " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified {
			rev += "+modified"
		}
		out += " " + rev
	}
	return out + " " + goruntime.Version()
}
