package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	gqlext "github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	coderws "github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/graph/generated"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/web"
)

// routes builds the HTTP surface: GraphQL (POST, graphql-transport-ws and
// SSE on one path), artifact downloads at /artifacts/{id}, GraphiQL at /,
// and /healthz. Every request meets the envelope middleware first, which
// reads only a header; nothing else supplies identity. A GraphQL request
// with an invalid, expired or ambiguous envelope is then answered
// UNAUTHENTICATED before anything else is spent on it (a WebSocket
// upgrade is accepted, and the socket answers it: see ws.go); the others
// meet the edge (body bounds and raw-input checks, before any parsing).
func (a *App) routes(ctx context.Context, root generated.ResolverRoot, verifier *authority.Verifier) (http.Handler, error) {
	lim := a.cfg.Limits.WithDefaults()
	exec := executor.New(graph.ShareStreams(generated.NewExecutableSchema(generated.Config{Resolvers: root}), a.metrics.StreamEvent))
	a.parseBudget = extension.NewParseBudget(lim.ParseBudget)
	gql := &gqlHandler{exec: a.parseBudget.Executor(exec), recover: exec.PresentRecoveredError}
	gql.AddTransport(transport.Websocket{
		// wsLimits adds what gqlgen leaves out of graphql-transport-ws:
		// the connection_init timeout (4408; gqlgen's own InitTimeout
		// stays zero), duplicate ids (4409), the per-connection
		// subscription bound and the raw-input check (server/ws.go).
		Implementation: wsLimits{
			accept: transport.CoderWebsocketImplementation{AcceptOptions: coderws.AcceptOptions{
				// Same-origin upgrades are always accepted; other browser
				// origins only when configured.
				OriginPatterns: a.cfg.AllowedOrigins,
			}},
			// initTimeout also bounds the life of a socket without a
			// valid envelope, which can run nothing.
			initTimeout:      lim.WSInitTimeout,
			maxSubscriptions: lim.MaxSubscriptions,
			open:             a.wsOpen,
			// The wsConn pings (a timer, not gqlgen's goroutine per
			// connection): gqlgen's PingPongInterval stays zero.
			ping: lim.WSPing,
		},
		PayloadReadLimit: &lim.MaxBody,
		InitFunc: func(ctx context.Context, _ transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			// The connection_init payload never carries identity: the
			// upgrade request's envelope header already put it in ctx.
			return ctx, nil, nil
		},
	})
	// SSE comments every WSPing (15 s) keep proxies from closing an idle
	// stream and let clients tell a silent dead connection (they resume
	// after 45 s without a byte).
	gql.AddTransport(transport.SSE{KeepAlivePingInterval: lim.WSPing})
	gql.AddTransport(transport.Options{})
	gql.AddTransport(transport.GET{})
	gql.AddTransport(transport.POST{})
	queries := extension.NewQueryCache[*ast.QueryDocument](lim.QueryCache)
	exec.SetQueryCache(queries)
	exec.SetDisableSuggestion(!a.suggestions())
	// QueryLimit counts tokens before this does; the parser's own count
	// (comments left out) is a second line that never fires first.
	exec.SetParserTokenLimit(lim.MaxTokens)
	if !lim.NoIntrospection {
		exec.Use(gqlext.Introspection{})
	}
	limit := extension.QueryLimit{
		MaxBytes: lim.MaxQuery, MaxTokens: lim.MaxTokens, AnonMaxTokens: lim.AnonMaxTokens,
		MaxFields: lim.MaxFields, MaxFragments: lim.MaxFragments, Cache: queries, Budget: a.parseBudget,
	}
	exec.Use(limit)
	exec.Use(extension.QueryShape{MaxDepth: lim.MaxDepth, Introspection: !lim.NoIntrospection})
	exec.Use(extension.InputCheck{})
	exec.Use(extension.StreamErrors{})
	exec.Use(&extension.CommandLimit{Rate: lim.CommandRate, Burst: lim.CommandBurst})
	exec.Use(extension.NewComplexityLimit(500))
	exec.SetErrorPresenter(extension.ErrorPresenter(a.log))
	exec.SetRecoverFunc(extension.Recover(a.log))

	mux := http.NewServeMux()
	// Each member's WebSockets and SSE subscriptions on this replica are
	// bounded together; identity is in the context by then.
	slots := newStreamSlots(lim.MaxStreams)
	slots.metrics = a.metrics
	mux.Handle("/graphql", slots.Wrap(gql))
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.cfg.MetricsAddr == "" {
		mux.Handle("GET /metrics", a.metricsHandler())
	}
	mux.HandleFunc("GET /artifacts/{id}", a.downloadArtifact)
	explorer := web.Config{Endpoint: "/graphql", Title: "turngate"}
	app := web.AppConfig{Endpoint: "/graphql", Header: a.cfg.IdentityHeader, Title: "turngate"}
	var page, chat http.Handler = web.Handler(explorer), web.App(app)
	if a.signer != nil {
		// Dev mode: the explorer opens signed in as the first demo
		// member, on the tour of the demo's shared room, and the chat as
		// the first demo member with a switch to the others — but only
		// for a request from this machine (a loopback peer, through no
		// proxy) by a loopback Host, so neither another host nor a page
		// of another name that resolves here (DNS rebinding) ever reads
		// an envelope.
		for _, p := range demo.People {
			tok, err := a.DevToken(p.Email, min(devPageEnvelopeLifetime, a.cfg.EnvelopeLifetime()))
			if err != nil {
				return nil, err
			}
			app.Dev = append(app.Dev, web.DevMember{Email: p.Email, Name: p.Name, Token: tok})
		}
		explorer.Headers = map[string]string{a.cfg.IdentityHeader: app.Dev[0].Token}
		if team, err := demo.TeamRoom(ctx, a.client); err == nil {
			explorer.DefaultQuery = demo.Tour(team.ID.String())
		}
		page, chat = loopbackOnly(web.Handler(explorer), page), loopbackOnly(web.App(app), chat)
	}
	// GraphiQL lives at /graphiql/ (its assets are relative to it).
	mux.Handle("/graphiql/", http.StripPrefix("/graphiql", page))
	mux.Handle("GET /graphiql", http.RedirectHandler("/graphiql/", http.StatusMovedPermanently))
	mux.Handle("/", chat)
	api := edge{
		maxBody: lim.MaxBody,
		gate:    newAnonymousGate(lim.AnonRequests),
		anonymous: func(query string) error {
			if _, err := limit.Bound(query, false); err != nil {
				return err
			}
			return nil // not err: a nil *errcode.Error is no nil error
		},
		next: mux,
	}
	authed := authority.Middleware(verifier, a.cfg.IdentityHeader)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/graphql" {
			mux.ServeHTTP(w, r)
			return
		}
		upgrade := r.Header.Get("Upgrade") != ""
		if err := authority.AuthErrorFromContext(r.Context()); err != nil && !upgrade {
			// Identity is decided first: an envelope that does not
			// verify is never taken for no envelope, and no budget or
			// rate limit answers before this does.
			writeError(w, http.StatusUnauthorized, err)
			return
		}
		api.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, lim.MaxBody)
		authed.ServeHTTP(w, r)
	}), nil
}

// gqlHandler serves gqlgen's transports as handler.Server does, with exec
// in place of gqlgen's executor: the parse budget's wrapper, which
// handler.Server has no seam for.
type gqlHandler struct {
	transports []graphql.Transport
	exec       graphql.GraphExecutor
	recover    func(ctx context.Context, err any) error
}

func (h *gqlHandler) AddTransport(t graphql.Transport) { h.transports = append(h.transports, t) }

func (h *gqlHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			err := h.recover(r.Context(), p)
			writeError(w, http.StatusInternalServerError, err)
		}
	}()
	r = r.WithContext(graphql.StartOperationTrace(r.Context()))
	for _, t := range h.transports {
		if t.Supports(r) {
			t.Do(w, r, h.exec)
			return
		}
	}
	writeError(w, http.StatusBadRequest, errcode.New(errcode.BadUserInput, "transport not supported"))
}

// loopbackOnly serves signedIn to a request from a loopback peer that
// loaded the page by a loopback Host, and plain to every other. The Host
// alone is the client's to choose; the peer address is the kernel's.
func loopbackOnly(signedIn, plain http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopbackPeer(r) && loopbackHost(r.Host) {
			signedIn.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
}

// proxyHeaders say a request came through a proxy: its peer is then the
// proxy, and the client behind it is not known to be this machine.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"}

// loopbackPeer reports whether the request's connection comes from a
// loopback address, through no proxy that says so.
func loopbackPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return false
	}
	for _, h := range proxyHeaders {
		if len(r.Header.Values(h)) > 0 {
			return false
		}
	}
	return true
}

// suggestions reports whether validation errors may say "did you mean":
// as configured, else only in dev mode.
func (a *App) suggestions() bool {
	if s := a.cfg.Limits.Suggestions; s != nil {
		return *s
	}
	return a.cfg.Dev()
}

// loopbackHost reports whether a request's Host names this machine by a
// loopback name or address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// healthz answers 200 when the database answers.
func (a *App) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// readyz answers 200 when the replica should get traffic: the database
// answers, its schema is at this binary's latest migration, and no
// orderly stop has begun. Otherwise 503, saying which.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if a.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	if err := a.db.PingContext(ctx); err != nil {
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	applied, err := migrations.Applied(ctx, a.db)
	if err != nil {
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	if latest, err := migrations.Latest(); err != nil || applied != latest {
		http.Error(w, fmt.Sprintf("schema at migration %d, this binary needs %d", applied, latest), http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// metricsHandler serves the replica's Prometheus series.
func (a *App) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{})
}

// downloadArtifact serves an artifact's content to a caller who may read
// it now: the identity comes from the envelope header, as for /graphql,
// and every request is re-authorised and digest-verified before a byte is
// written. An artifact the caller may not read is the same 404 as one
// that does not exist; content that fails its digest check is a 409.
func (a *App) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	m, err := a.members.Current(r.Context())
	if err != nil {
		if errors.Is(err, authority.ErrUnauthenticated) {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		a.downloadFailed(w, r, "resolve member", err)
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "artifact not found", http.StatusNotFound)
		return
	}
	ref, content, err := a.resources.Read(r.Context(), m.ID, id)
	switch {
	case errors.Is(err, resource.ErrArtifactNotFound):
		http.Error(w, "artifact not found", http.StatusNotFound)
		return
	case errors.Is(err, resource.ErrDigestMismatch):
		a.log.ErrorContext(r.Context(), "artifact download refused", "artifact", id, "err", err)
		http.Error(w, "artifact content failed its digest check; it is not served", http.StatusConflict)
		return
	case err != nil:
		a.downloadFailed(w, r, "read artifact "+id.String(), err)
		return
	}
	h := w.Header()
	etag := `"` + ref.SHA256 + `"`
	h.Set("ETag", etag)
	// Cached copies are revalidated, so every read is re-authorised.
	h.Set("Cache-Control", "private, no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	mediaType := ref.MediaType
	if _, _, err := mime.ParseMediaType(mediaType); err != nil {
		mediaType = "application/octet-stream"
	}
	h.Set("Content-Type", mediaType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": ref.Name}))
	h.Set("Content-Length", strconv.Itoa(len(content)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(content)
	}
}

// downloadFailed answers a download the server could not serve: 503
// with Retry-After when the database is unavailable (retry), 500
// otherwise (a bug, logged).
func (a *App) downloadFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errcode.StorageUnavailable(err) {
		a.log.WarnContext(r.Context(), "artifact download: database unavailable", "what", what, "err", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the database is unavailable; retry", http.StatusServiceUnavailable)
		return
	}
	a.log.ErrorContext(r.Context(), "artifact download", "what", what, "err", err)
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// etagMatches reports whether an If-None-Match header names etag.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
