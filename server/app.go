package server

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/turngate/turngate/admin"
	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/feed"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/graph"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/graph/generated"
	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/migrations"
	pgdb "github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/sandbox"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/tracing"
	"github.com/turngate/turngate/turn"
)

// App is one turngate server process: its database, its runner and its
// HTTP server. New wires it, Serve runs it, Close releases everything.
type App struct {
	cfg Config
	log *slog.Logger

	pg      *pgembed.Postgres // nil with DATABASE_URL
	db      *sql.DB
	client  *ent.Client
	hub     *journal.Hub
	runner  *runner.Runner
	members *authority.Members
	rooms   *room.Service
	turns   *turn.Service
	// resources is the artifact and document store the API and the
	// download route read through.
	resources *resource.Store
	streams   *graph.Streams    // the subscriptions' goroutines
	wsOpen    *wsOpen           // the open WebSockets, which an orderly stop closes
	keySet    *authority.KeySet // the identity provider's keys; nil without one
	// parseBudget bounds the query documents being parsed at once.
	parseBudget *extension.ParseBudget
	// stopTracing flushes and stops the OTEL exporter; nil when a test
	// supplied the provider.
	stopTracing func(context.Context) error
	metrics     *metrics.Metrics // this replica's Prometheus series
	// draining is set when an orderly stop begins: /readyz answers 503
	// from then on, before the server stops accepting.
	draining atomic.Bool
	signer   *authority.Signer // dev mode only
	sandbox  *sandbox.Pool     // run_code's worker processes; nil with NoRunner
	handler  http.Handler

	ln        net.Listener
	srv       *http.Server
	closeOnce sync.Once
}

// New starts the database (the embedded one unless DATABASE_URL is set),
// applies migrations, seeds the demo data when asked, and wires the
// services. It does not listen yet.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *App, err error) {
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()

	url := cfg.DatabaseURL
	if url == "" {
		a.pg, err = pgembed.Start(ctx, pgembed.Options{
			Dir:     EmbeddedDir(cfg),
			Durable: true,
			Logf:    func(f string, args ...any) { log.Info(fmt.Sprintf(f, args...)) },
		})
		if err != nil {
			return nil, err
		}
		if err := EnsureDatabase(ctx, a.pg.URL("postgres"), "turngate"); err != nil {
			return nil, err
		}
		url = a.pg.URL("turngate")
	}
	// direct reaches Postgres without a pooler: the LISTEN connection and
	// the migrations (a session advisory lock) need a session.
	direct := url
	if cfg.DirectDatabaseURL != "" {
		direct = cfg.DirectDatabaseURL
	}
	// One round trip per statement, with or without a pooler; without a
	// transaction pooler, each statement planned once per connection
	// (pg.Open).
	if cfg.DBPooler == PoolerTransaction {
		a.db, err = pgdb.OpenUnprepared(url)
	} else {
		a.db, err = pgdb.Open(url)
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pool := cfg.DBMaxConns
	if pool == 0 {
		pool = DefaultDBMaxConns
	}
	a.db.SetMaxOpenConns(pool)
	a.db.SetMaxIdleConns(pool)
	a.db.SetConnMaxIdleTime(5 * time.Minute)
	if err := a.db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if direct == url {
		err = migrations.ApplyDB(ctx, a.db)
	} else {
		err = migrations.Apply(ctx, direct)
	}
	if err != nil {
		return nil, err
	}
	a.client = ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, a.db)))

	verifier, err := a.verifier(ctx)
	if err != nil {
		return nil, err
	}

	a.metrics = metrics.New(a.db)
	tp := cfg.TracerProvider
	if tp == nil {
		var shutdown func(context.Context) error
		if tp, shutdown, err = tracing.FromEnv(ctx); err != nil {
			return nil, fmt.Errorf("tracing (OTEL_*): %w", err)
		}
		a.stopTracing = shutdown
	}
	tracer := tracing.Tracer(tp)
	a.hub = journal.NewHub(journal.HubConfig{DB: a.db, ListenURL: direct, Logger: log})
	a.members = &authority.Members{Client: a.client}
	a.rooms = &room.Service{Client: a.client, Hub: a.hub, Metrics: a.metrics}
	a.turns = &turn.Service{Client: a.client, DB: a.db, Unprepared: cfg.DBPooler == PoolerTransaction, Hub: a.hub, Metrics: a.metrics, Tracer: tracer}
	providers := map[string]gateway.Provider{"builtin": gateway.Builtin{Pace: cfg.ModelPace}}
	if cfg.OpenAI.BaseURL != "" || cfg.OpenAI.APIKey != "" {
		providers["openai"] = gateway.NewOpenAI(cfg.OpenAI)
	}
	gw := gateway.New(providers)
	toolset := tools.Default().With(tools.SendWebhook{Endpoints: cfg.Webhooks})
	if !cfg.NoRunner {
		// Scripts run in worker processes of this binary, bounded in
		// memory, time and number (DESIGN §10).
		lim := cfg.Limits.WithDefaults()
		a.sandbox = sandbox.NewPool(sandbox.PoolConfig{
			Workers: lim.SandboxWorkers, Queue: lim.SandboxQueue, Memory: lim.SandboxMemory, WallTime: lim.SandboxWallTime,
			Lazy: lim.SandboxLazy,
		})
		if err := a.sandbox.Start(ctx); err != nil {
			return nil, fmt.Errorf("start the run_code sandbox: %w", err)
		}
		toolset = toolset.With(tools.RunCode{Sandbox: a.sandbox})
	}
	a.runner = runner.New(runner.Config{
		Client: a.client, Hub: a.hub, Gateway: gw, Owner: cfg.Replica, ApprovalTimeout: cfg.ApprovalTimeout,
		Tools: toolset, LeaseTTL: cfg.LeaseTTL, Logger: log,
		Poll: min(time.Second, cfg.LeaseTTL/4), Drain: cfg.Drain, Metrics: a.metrics, Tracer: tracer,
	})
	if !cfg.NoRunner {
		a.turns.Runner = a.runner
	}

	// The default agent is demo data: a production server starts with the
	// agents it was given, and seeds none.
	if cfg.Demo {
		if err := demo.SeedAgent(ctx, a.client); err != nil {
			return nil, err
		}
	}
	if cfg.AgentRoute != "" {
		if err := demo.UseRoute(ctx, a.client, cfg.AgentRoute); err != nil {
			return nil, err
		}
	}
	if cfg.Demo {
		if err := demo.Seed(ctx, a.client, a.rooms, a.members); err != nil {
			return nil, err
		}
	}

	a.resources = resource.NewStore(a.client)
	a.streams = graph.NewStreams()
	a.wsOpen = &wsOpen{}
	resolver := &graph.Resolver{
		Members: a.members, Rooms: a.rooms, Turns: a.turns, Resources: a.resources, Admin: &admin.Service{Client: a.client},
		Feed: feed.New(a.client, journal.NewLog(a.client, a.hub)), Streams: a.streams, MaxTextLen: cfg.MaxTextLen,
	}
	if !cfg.NoRunner {
		resolver.Runs = a.runner
	}
	a.handler, err = a.routes(ctx, a.resolverRoot(resolver), verifier)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// verifier builds the envelope verifier: the platform's public key in
// production, the dev key in the data folder otherwise.
func (a *App) verifier(ctx context.Context) (*authority.Verifier, error) {
	vc := authority.VerifierConfig{Issuer: a.cfg.EnvelopeIssuer, Audience: a.cfg.EnvelopeAud, Leeway: 30 * time.Second,
		MaxLifetime: a.cfg.EnvelopeLifetime()}
	switch {
	case a.cfg.Dev():
		key, err := authority.LoadOrCreateDevKey(a.cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("dev signing key: %w", err)
		}
		vc.PublicKey = key.Public().(ed25519.PublicKey)
		a.signer = authority.NewSigner(a.cfg.EnvelopeIssuer, a.cfg.EnvelopeAud, key)
	case a.cfg.EnvelopeJWKSURL != "":
		// The key set is read now (a replica that cannot verify anyone
		// does not start) and refreshed until the app closes.
		a.keySet = authority.NewKeySet(authority.JWKSConfig{URL: a.cfg.EnvelopeJWKSURL, Refresh: a.cfg.EnvelopeJWKSRefresh})
		if err := a.keySet.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
		vc.Keys = a.keySet
	default:
		pub, err := authority.LoadPublicKeyPEM(a.cfg.EnvelopeKeyFile)
		if err != nil {
			return nil, fmt.Errorf("envelope public key: %w", err)
		}
		vc.PublicKey = pub
	}
	return authority.NewVerifier(vc)
}

// EnsureDatabase creates database name on the server at adminURL if missing.
func EnsureDatabase(ctx context.Context, adminURL, name string) error {
	db, err := sql.Open("postgres", adminURL)
	if err != nil {
		return err
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("check database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Listen binds the HTTP address (port 0 picks a free one). In dev mode
// the address bound must be loopback unless DevAllowPublicListener says
// otherwise: Check reads the address as written, this is the address a
// name resolved to.
func (a *App) Listen() error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
	}
	if a.cfg.Dev() {
		if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
			if !a.cfg.DevAllowPublicListener {
				ln.Close()
				return devListenerError(ln.Addr().String())
			}
			a.log.Warn("dev mode on an address other hosts may reach (TURNGATE_DEV_ALLOW_PUBLIC_LISTENER): "+
				"anyone who reaches it can use envelopes minted with the dev key; the signed-in pages go to loopback peers only",
				"addr", ln.Addr().String())
		}
	}
	a.ln = ln
	return nil
}

// Addr is the bound address, after Listen.
func (a *App) Addr() string { return a.ln.Addr().String() }

// DB is the App's database handle.
func (a *App) DB() *sql.DB { return a.db }

// Serve runs the hub, the runner and the HTTP server until ctx ends, then
// shuts them down in order: stop accepting requests, detach the runner
// (its turns go back to their lanes), stop the hub.
func (a *App) Serve(ctx context.Context) error {
	if a.ln == nil {
		if err := a.Listen(); err != nil {
			return err
		}
	}
	if err := a.hub.Start(ctx); err != nil {
		return err
	}
	if !a.cfg.NoRunner {
		if err := a.runner.Start(ctx); err != nil {
			return err
		}
	}
	lim := a.cfg.Limits.WithDefaults()
	a.srv = &http.Server{
		Handler: a.handler,
		// ReadTimeout covers a request's headers and body; the edge
		// lifts it for a stream once its body is read, and a WebSocket
		// upgrade drops it. Responses have no write timeout: streams
		// are long.
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		IdleTimeout:       lim.IdleTimeout,
		// Requests do not end with ctx: an orderly stop ends the streams
		// itself, so that clients resume instead of taking them for done.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 2)
	go func() { errc <- a.srv.Serve(a.ln) }()
	if a.cfg.MetricsAddr != "" {
		// /metrics (and the probes) on a listener of their own, for a
		// scraper that should not reach the API.
		mln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on %s for metrics: %w", a.cfg.MetricsAddr, err)
		}
		msrv := a.opsServer()
		defer msrv.Close()
		go func() {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		a.log.Info("metrics", "addr", mln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Not ready from here on: a load balancer stops sending new work
	// while the streams move and runs in flight finish.
	a.draining.Store(true)
	a.log.Info("draining: closing streams, then letting runs in flight finish", "drain", a.cfg.Drain)
	// Streams first: WebSockets close with 1012 (service restart) and
	// every subscription ends with a retryable UNAVAILABLE, so clients
	// reconnect to another replica and resume after their last position.
	a.wsOpen.closeAll(wsCloseServiceRestart, "service restart")
	a.streams.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = a.srv.Close() // long-lived subscriptions
	}
	a.runner.Stop()
	a.hub.Stop()
	return err
}

// MaxProfileDuration bounds a CPU profile, an execution trace or a delta
// profile (?seconds=) on the operators' address.
const MaxProfileDuration = 30 * time.Second

// opsServer is the operators' server: /metrics, the probes and, with
// Pprof, Go's profiles. Every request is bounded in time: reading it,
// and writing its answer, which a profile takes at most
// MaxProfileDuration to start.
func (a *App) opsServer() *http.Server {
	lim := a.cfg.Limits.WithDefaults()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metricsHandler())
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.cfg.Pprof {
		// Go's profiles, on the operators' address only (never the
		// API's), and only when asked for: they are anonymous.
		mux.Handle("GET /debug/pprof/", boundedProfile(http.HandlerFunc(pprof.Index)))
		mux.Handle("GET /debug/pprof/profile", boundedProfile(http.HandlerFunc(pprof.Profile)))
		mux.Handle("GET /debug/pprof/trace", boundedProfile(http.HandlerFunc(pprof.Trace)))
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		// pprof refuses a profile longer than the write timeout; this one
		// leaves the longest room to be written.
		WriteTimeout: MaxProfileDuration + 15*time.Second,
		IdleTimeout:  lim.IdleTimeout,
	}
}

// boundedProfile refuses, with 400, a profile whose seconds parameter is
// not a whole number from 1 to MaxProfileDuration: a CPU profile, a
// trace and every named profile's delta (heap?seconds=N) hold the
// request, and the CPU profiler, that long.
func boundedProfile(next http.Handler) http.Handler {
	most := int(MaxProfileDuration / time.Second)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query()["seconds"]; len(v) > 0 {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 || n > most || len(v) > 1 {
				http.Error(w, fmt.Sprintf("seconds is a whole number from 1 to %d", most), http.StatusBadRequest)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Close stops the sandbox's workers, releases the database and stops the
// embedded Postgres. Safe to call twice.
func (a *App) Close() {
	a.closeOnce.Do(func() {
		if a.keySet != nil {
			a.keySet.Stop()
		}
		if a.stopTracing != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a.stopTracing(ctx)
			cancel()
		}
		if a.streams != nil {
			a.streams.Stop() // first: they read the hub and the database
		}
		if a.runner != nil {
			a.runner.Stop()
		}
		if a.hub != nil {
			a.hub.Stop()
		}
		if a.sandbox != nil {
			a.sandbox.Stop() // after the runner: no run_code call is left
		}
		if a.db != nil {
			a.db.Close()
		}
		if a.pg != nil {
			if err := a.pg.Stop(); err != nil {
				a.log.Warn("stopping embedded postgres", "err", err)
			}
		}
	})
}

// DevToken mints an envelope for a demo member (dev mode only).
func (a *App) DevToken(email string, ttl time.Duration) (string, error) {
	if a.signer == nil {
		return "", errors.New("not in dev mode: envelopes come from the platform")
	}
	return MintDev(a.signer, email, ttl)
}

// resolverRoot is the resolvers the GraphQL handler serves: resolver
// itself, or what a test wraps it in (Config.wrapResolvers).
func (a *App) resolverRoot(r *graph.Resolver) generated.ResolverRoot {
	if a.cfg.wrapResolvers != nil {
		return a.cfg.wrapResolvers(r)
	}
	return r
}
