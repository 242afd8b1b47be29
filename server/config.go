package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/graph"
	"github.com/turngate/turngate/graph/generated"
)

// Config is the server's configuration: embedded defaults, overridden by
// environment variables, overridden by flags.
type Config struct {
	// Addr is the HTTP listen address (TURNGATE_ADDR).
	Addr string
	// MetricsAddr, when set, serves /metrics on a listener of its own
	// instead of on Addr (TURNGATE_METRICS_ADDR).
	MetricsAddr string
	// Pprof serves Go's profiles at /debug/pprof/ on MetricsAddr
	// (TURNGATE_PPROF; off by default, and never on Addr): each profile
	// or trace at most MaxProfileDuration long.
	Pprof bool
	// DevAllowPublicListener lets dev mode listen on an address that is
	// not loopback (TURNGATE_DEV_ALLOW_PUBLIC_LISTENER=yes-i-understand).
	// Even then the pages that carry envelopes go to loopback peers only.
	DevAllowPublicListener bool
	// LogLevel is the least level logged: debug, info, warn or error
	// (TURNGATE_LOG_LEVEL, info). LogFormat is json or text
	// (TURNGATE_LOG_FORMAT; json outside dev mode, text in it).
	LogLevel, LogFormat string
	// TracerProvider, when set, replaces the one the OTEL_* variables
	// describe (tests use an in-memory exporter).
	TracerProvider trace.TracerProvider
	// DataDir holds the embedded Postgres and the dev signing key
	// (TURNGATE_DATA).
	DataDir string
	// DatabaseURL, when set, is used instead of the embedded Postgres
	// (DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds this replica's database connection pool
	// (TURNGATE_DB_MAX_CONNS, --db-max-conns; 0 means DefaultDBMaxConns).
	// The hub's LISTEN connection comes on top. Size it so that every
	// replica's pool plus one, plus room for migrations and operators, fits
	// under the server's max_connections less its reserved slots: with the
	// default max_connections of 100, two replicas of 40 each.
	DBMaxConns int
	// DBPooler names the pooler DatabaseURL goes through
	// (TURNGATE_DB_POOLER, --db-pooler): "" (none, or one in session
	// mode) or "transaction" (PgBouncer's transaction pooling: a server
	// connection is only this replica's for one transaction, so the
	// replica prepares no named statements and sends each statement with
	// its parameters in one round trip). It needs DirectDatabaseURL.
	DBPooler string
	// DirectDatabaseURL, when set, reaches Postgres without the pooler
	// (TURNGATE_DIRECT_DATABASE_URL): the replica's LISTEN connection,
	// which needs a session of its own, and the migrations use it.
	DirectDatabaseURL string
	// IdentityHeader carries the identity envelope (TURNGATE_IDENTITY_HEADER).
	IdentityHeader string
	// EnvelopeKeyFile is the PKIX PEM public key of the platform that signs
	// envelopes (TURNGATE_ENVELOPE_PUBLIC_KEY). Empty: dev mode, with a
	// signing key kept in DataDir.
	EnvelopeKeyFile string
	// EnvelopeJWKSURL is an identity provider's key set (JWKS), instead
	// of one key: envelopes name their key by kid
	// (TURNGATE_ENVELOPE_JWKS_URL).
	EnvelopeJWKSURL string
	// EnvelopeJWKSRefresh is how often the key set is read again when no
	// envelope asks sooner (TURNGATE_ENVELOPE_JWKS_REFRESH; 0 means
	// authority.DefaultJWKSRefresh): the longest a withdrawn key keeps
	// verifying.
	EnvelopeJWKSRefresh time.Duration
	// EnvelopeMaxLifetime bounds an envelope's exp from its iat
	// (TURNGATE_ENVELOPE_MAX_LIFETIME; 0 means EnvelopeLifetime's
	// default).
	EnvelopeMaxLifetime time.Duration
	EnvelopeIssuer      string // TURNGATE_ENVELOPE_ISSUER
	EnvelopeAud         string // TURNGATE_ENVELOPE_AUDIENCE
	// Demo seeds demo members, an agent and rooms (TURNGATE_DEMO; default
	// on in dev mode).
	Demo bool
	// ModelPace is the builtin model's delay between tokens
	// (TURNGATE_MODEL_PACE).
	ModelPace time.Duration
	// OpenAI configures the openai provider: any OpenAI-compatible Chat
	// Completions endpoint (TURNGATE_OPENAI_BASE_URL,
	// TURNGATE_OPENAI_API_KEY, TURNGATE_OPENAI_MODEL, and
	// TURNGATE_OPENAI_EFFORT for endpoints that take reasoning effort).
	// It is offered when a base URL or key is set.
	OpenAI gateway.OpenAIConfig
	// Webhooks are the endpoints send_webhook may post to, by name
	// (TURNGATE_WEBHOOKS: name=url,name=url). None: it refuses every call.
	Webhooks map[string]string
	// ApprovalTimeout bounds how long a proposed external effect waits
	// for a member's decision (TURNGATE_APPROVAL_TIMEOUT).
	ApprovalTimeout time.Duration
	// AgentRoute, when set, is the default agent's model route
	// (TURNGATE_AGENT_ROUTE): "builtin", "openai" or "openai:<model>".
	AgentRoute string
	// MaxTextLen bounds a message in characters (TURNGATE_MAX_TEXT).
	MaxTextLen int
	// LeaseTTL is a run's lease length (TURNGATE_LEASE_TTL).
	LeaseTTL time.Duration
	// AllowedOrigins are extra Origin patterns accepted on WebSocket
	// upgrades (TURNGATE_ALLOWED_ORIGINS, comma separated); same-origin is
	// always accepted.
	AllowedOrigins []string
	// Replica names this process in leases (TURNGATE_REPLICA).
	Replica string
	// Drain is how long an orderly stop lets runs in flight finish before
	// handing their turns to other replicas (TURNGATE_DRAIN).
	Drain time.Duration
	// NoRunner serves the API without claiming turns (TURNGATE_NO_RUNNER):
	// an API-only replica.
	NoRunner bool
	// Limits bound what clients can make this replica hold.
	Limits Limits

	// wrapResolvers, in tests only, wraps the GraphQL resolvers (to
	// force a panic, for instance).
	wrapResolvers func(*graph.Resolver) generated.ResolverRoot
}

// Limits bound everything a client can make one replica hold or spend:
// request bodies, query documents and their cache, sockets and
// subscriptions, command rates and the sandbox. A zero field means its
// default; each has an environment variable, listed in Limits.vars and in
// the README's "Limits and errors".
type Limits struct {
	// MaxBody bounds an HTTP request body and a WebSocket message, in
	// bytes (TURNGATE_MAX_BODY, 1 MiB).
	MaxBody int64
	// MaxQuery bounds a GraphQL query document, in bytes
	// (TURNGATE_MAX_QUERY, 64 KiB).
	MaxQuery int64
	// QueryCache bounds the parsed-query cache by the bytes of the
	// documents it holds, weighted by what their parse costs
	// (TURNGATE_QUERY_CACHE, 16 MiB).
	QueryCache int64
	// MaxFields bounds the selections of a query document — fields and
	// fragment spreads as written, each spread of a fragment again
	// counted — counted by a lexer pass before it is validated
	// (TURNGATE_MAX_FIELDS, 500): validation is quadratic in selections
	// that may overlap.
	MaxFields int
	// MaxFragments bounds a query document's fragment definitions,
	// counted with its selections (TURNGATE_MAX_FRAGMENTS, 100).
	MaxFragments int
	// MaxTokens bounds the tokens of a query document from a member,
	// comments included, counted by a lexer pass before it is parsed
	// (TURNGATE_MAX_TOKENS, 40000): a parsed token takes up to some 400
	// bytes of tree.
	MaxTokens int
	// AnonMaxTokens is MaxTokens for a request without an identity
	// envelope (TURNGATE_MAX_TOKENS_ANONYMOUS, 1000): enough for
	// __typename and the introspection queries of GraphiQL and code
	// generators, which is all such a request can run.
	AnonMaxTokens int
	// AnonRequests bounds the GraphQL requests without an identity
	// envelope this replica serves at once (TURNGATE_ANONYMOUS_REQUESTS,
	// 1); more wait their turn, up to a second, then are RATE_LIMITED.
	AnonRequests int
	// ParseBudget bounds the query documents being parsed and validated
	// at once on this replica, each weighed as the parsed-query cache
	// weighs it (TURNGATE_PARSE_BUDGET, 64 MiB); past it a request is
	// RATE_LIMITED. Requests without an identity envelope may hold at
	// most a quarter of it.
	ParseBudget int64
	// MaxDepth bounds the nesting of a query's selections, introspection
	// included (TURNGATE_MAX_DEPTH, 15).
	MaxDepth int
	// WSInitTimeout is how long a WebSocket may wait before
	// connection_init (TURNGATE_WS_INIT_TIMEOUT, 10s); then it is closed
	// with 4408.
	WSInitTimeout time.Duration
	// WSPing is how often the server pings a graphql-transport-ws client
	// and an SSE stream (TURNGATE_WS_PING, 15s): the pings keep proxies
	// from closing idle streams and let clients tell a dead connection.
	WSPing time.Duration
	// MaxSubscriptions bounds the subscriptions open on one WebSocket
	// (TURNGATE_MAX_SUBSCRIPTIONS, 100).
	MaxSubscriptions int
	// MaxStreams bounds one member's open streams on this replica:
	// WebSocket connections and SSE subscriptions together
	// (TURNGATE_MAX_STREAMS_PER_MEMBER, 50).
	MaxStreams int
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are the HTTP
	// server's (TURNGATE_READ_HEADER_TIMEOUT 10s, TURNGATE_READ_TIMEOUT
	// 30s, TURNGATE_IDLE_TIMEOUT 120s). ReadTimeout covers reading a
	// request, body included; a stream's request is read under it, then
	// the stream itself lives on.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// CommandRate and CommandBurst are the token bucket of one member's
	// commands on this replica: every mutation, since every one writes
	// (TURNGATE_COMMAND_RATE 5 per second, TURNGATE_COMMAND_BURST 30).
	CommandRate  float64
	CommandBurst int
	// SandboxMemory bounds one run_code script's memory, in bytes
	// (TURNGATE_SANDBOX_MEMORY, 128 MiB).
	SandboxMemory int64
	// SandboxWorkers bounds the run_code scripts running at once on this
	// replica (TURNGATE_SANDBOX_WORKERS, 4); SandboxQueue bounds those
	// waiting for a worker (TURNGATE_SANDBOX_QUEUE, 64): past it a call
	// is refused with a tool error.
	SandboxWorkers int
	SandboxQueue   int
	// SandboxWallTime bounds one script's run (TURNGATE_SANDBOX_WALL_TIME,
	// 2s).
	SandboxWallTime time.Duration
	// NoIntrospection refuses introspection queries
	// (TURNGATE_INTROSPECTION=false; on by default: typed clients and
	// GraphiQL read the schema through it).
	NoIntrospection bool
	// Suggestions adds "did you mean" hints to validation errors
	// (TURNGATE_SUGGESTIONS; nil: on in dev mode, off otherwise).
	Suggestions *bool
}

// Default limits.
const (
	DefaultMaxBody           = 1 << 20
	DefaultMaxQuery          = 64 << 10
	DefaultQueryCache        = 16 << 20
	DefaultMaxDepth          = 15
	DefaultMaxFields         = 500
	DefaultMaxFragments      = 100
	DefaultMaxTokens         = 40000
	DefaultAnonMaxTokens     = 1000
	DefaultParseBudget       = 64 << 20
	DefaultAnonRequests      = 1
	DefaultWSInitTimeout     = 10 * time.Second
	DefaultWSPing            = 15 * time.Second
	DefaultMaxSubscriptions  = 100
	DefaultMaxStreams        = 50
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultCommandRate       = 5.0
	DefaultCommandBurst      = 30
	DefaultSandboxMemory     = 128 << 20
	DefaultSandboxWorkers    = 4
	DefaultSandboxQueue      = 64
	DefaultSandboxWallTime   = 2 * time.Second
)

// WithDefaults fills every zero field with its default.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxBody, DefaultMaxBody)
	def(&l.MaxQuery, DefaultMaxQuery)
	def(&l.QueryCache, DefaultQueryCache)
	defInt(&l.MaxDepth, DefaultMaxDepth)
	defInt(&l.MaxFields, DefaultMaxFields)
	defInt(&l.MaxFragments, DefaultMaxFragments)
	defInt(&l.MaxTokens, DefaultMaxTokens)
	defInt(&l.AnonMaxTokens, DefaultAnonMaxTokens)
	def(&l.ParseBudget, DefaultParseBudget)
	defInt(&l.AnonRequests, DefaultAnonRequests)
	defDur(&l.WSInitTimeout, DefaultWSInitTimeout)
	defDur(&l.WSPing, DefaultWSPing)
	defInt(&l.MaxSubscriptions, DefaultMaxSubscriptions)
	defInt(&l.MaxStreams, DefaultMaxStreams)
	defDur(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defDur(&l.ReadTimeout, DefaultReadTimeout)
	defDur(&l.IdleTimeout, DefaultIdleTimeout)
	if l.CommandRate <= 0 {
		l.CommandRate = DefaultCommandRate
	}
	defInt(&l.CommandBurst, DefaultCommandBurst)
	def(&l.SandboxMemory, DefaultSandboxMemory)
	defInt(&l.SandboxWorkers, DefaultSandboxWorkers)
	defInt(&l.SandboxQueue, DefaultSandboxQueue)
	defDur(&l.SandboxWallTime, DefaultSandboxWallTime)
	return l
}

// vars are the limits' environment variables.
func (l *Limits) vars() []envVar {
	return []envVar{
		{"TURNGATE_MAX_BODY", &l.MaxBody},
		{"TURNGATE_MAX_QUERY", &l.MaxQuery},
		{"TURNGATE_QUERY_CACHE", &l.QueryCache},
		{"TURNGATE_MAX_DEPTH", &l.MaxDepth},
		{"TURNGATE_MAX_FIELDS", &l.MaxFields},
		{"TURNGATE_MAX_FRAGMENTS", &l.MaxFragments},
		{"TURNGATE_MAX_TOKENS", &l.MaxTokens},
		{"TURNGATE_MAX_TOKENS_ANONYMOUS", &l.AnonMaxTokens},
		{"TURNGATE_PARSE_BUDGET", &l.ParseBudget},
		{"TURNGATE_ANONYMOUS_REQUESTS", &l.AnonRequests},
		{"TURNGATE_WS_INIT_TIMEOUT", &l.WSInitTimeout},
		{"TURNGATE_WS_PING", &l.WSPing},
		{"TURNGATE_MAX_SUBSCRIPTIONS", &l.MaxSubscriptions},
		{"TURNGATE_MAX_STREAMS_PER_MEMBER", &l.MaxStreams},
		{"TURNGATE_READ_HEADER_TIMEOUT", &l.ReadHeaderTimeout},
		{"TURNGATE_READ_TIMEOUT", &l.ReadTimeout},
		{"TURNGATE_IDLE_TIMEOUT", &l.IdleTimeout},
		{"TURNGATE_COMMAND_RATE", &l.CommandRate},
		{"TURNGATE_COMMAND_BURST", &l.CommandBurst},
		{"TURNGATE_SANDBOX_MEMORY", &l.SandboxMemory},
		{"TURNGATE_SANDBOX_WORKERS", &l.SandboxWorkers},
		{"TURNGATE_SANDBOX_QUEUE", &l.SandboxQueue},
		{"TURNGATE_SANDBOX_WALL_TIME", &l.SandboxWallTime},
	}
}

// envVar is one numeric setting read from the environment.
type envVar struct {
	name string
	ptr  any // *int64 (bytes: 1048576, 1024KiB, 1MiB), *int, *float64 or *time.Duration
}

// parse sets the variable from v.
func (e envVar) parse(v string) error {
	var err error
	switch p := e.ptr.(type) {
	case *int64:
		*p, err = parseBytes(v)
	case *int:
		*p, err = strconv.Atoi(v)
	case *float64:
		*p, err = strconv.ParseFloat(v, 64)
	case *time.Duration:
		*p, err = time.ParseDuration(v)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	return nil
}

// parseBytes reads a size: a number of bytes, optionally with a KiB, MiB
// or GiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, suffix)), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a size in bytes (e.g. 1048576 or 1MiB), got %q", s)
	}
	return n * mult, nil
}

// Dev reports whether envelopes are verified with the dev key.
func (c Config) Dev() bool { return c.EnvelopeKeyFile == "" && c.EnvelopeJWKSURL == "" }

// Envelope lifetimes: the longest an envelope may live by default, and
// the dev page's envelopes, which are minted once, when the server starts.
const (
	DefaultEnvelopeMaxLifetime = 24 * time.Hour
	devPageEnvelopeLifetime    = 30 * 24 * time.Hour
)

// EnvelopeLifetime is the longest lifetime an envelope may have:
// EnvelopeMaxLifetime when set, else a day — an identity provider's ID
// tokens live an hour or so — and in dev mode the dev page's 30 days.
func (c Config) EnvelopeLifetime() time.Duration {
	switch {
	case c.EnvelopeMaxLifetime > 0:
		return c.EnvelopeMaxLifetime
	case c.Dev():
		return devPageEnvelopeLifetime
	}
	return DefaultEnvelopeMaxLifetime
}

// The issuer and audience of dev envelopes, unless configured otherwise.
const (
	DevIssuer   = "turngate-dev"
	DevAudience = "turngate"
)

// devAllowPublicListener is the one value of
// TURNGATE_DEV_ALLOW_PUBLIC_LISTENER.
const devAllowPublicListener = "yes-i-understand"

// PoolerTransaction is DBPooler for a pooler in transaction pooling
// mode, such as PgBouncer's pool_mode = transaction.
const PoolerTransaction = "transaction"

// DefaultDBMaxConns is a replica's connection pool when none is set.
const DefaultDBMaxConns = 64

// ConfigFromEnv reads the configuration from the environment.
func ConfigFromEnv() (Config, error) {
	c := Config{
		Addr:              env("TURNGATE_ADDR", "127.0.0.1:8080"),
		MetricsAddr:       os.Getenv("TURNGATE_METRICS_ADDR"),
		LogLevel:          env("TURNGATE_LOG_LEVEL", "info"),
		LogFormat:         os.Getenv("TURNGATE_LOG_FORMAT"),
		DataDir:           env("TURNGATE_DATA", ".turngate"),
		DatabaseURL:       os.Getenv("DATABASE_URL"),
		DBPooler:          os.Getenv("TURNGATE_DB_POOLER"),
		DirectDatabaseURL: os.Getenv("TURNGATE_DIRECT_DATABASE_URL"),
		IdentityHeader:    env("TURNGATE_IDENTITY_HEADER", "X-Turngate-Identity"),
		EnvelopeKeyFile:   os.Getenv("TURNGATE_ENVELOPE_PUBLIC_KEY"),
		EnvelopeJWKSURL:   os.Getenv("TURNGATE_ENVELOPE_JWKS_URL"),
		EnvelopeIssuer:    env("TURNGATE_ENVELOPE_ISSUER", DevIssuer),
		EnvelopeAud:       env("TURNGATE_ENVELOPE_AUDIENCE", DevAudience),
		MaxTextLen:        16000,
		ModelPace:         25 * time.Millisecond,
		LeaseTTL:          30 * time.Second,
		Drain:             10 * time.Second,
		Replica:           os.Getenv("TURNGATE_REPLICA"),
		AgentRoute:        os.Getenv("TURNGATE_AGENT_ROUTE"),
		OpenAI: gateway.OpenAIConfig{
			BaseURL: os.Getenv("TURNGATE_OPENAI_BASE_URL"),
			APIKey:  os.Getenv("TURNGATE_OPENAI_API_KEY"),
			Model:   os.Getenv("TURNGATE_OPENAI_MODEL"),
		},
	}
	c.Demo = c.Dev()
	var err error
	switch v := os.Getenv("TURNGATE_DEV_ALLOW_PUBLIC_LISTENER"); v {
	case "":
	case devAllowPublicListener:
		c.DevAllowPublicListener = true
	default:
		// Consent to expose dev mode is spelled out, never a truthy
		// value someone copied from another setting.
		return c, fmt.Errorf("TURNGATE_DEV_ALLOW_PUBLIC_LISTENER: the only value is %s, got %q", devAllowPublicListener, v)
	}
	if v := os.Getenv("TURNGATE_PPROF"); v != "" {
		if c.Pprof, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("TURNGATE_PPROF: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_DEMO"); v != "" {
		if c.Demo, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("TURNGATE_DEMO: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_NO_RUNNER"); v != "" {
		if c.NoRunner, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("TURNGATE_NO_RUNNER: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_MODEL_PACE"); v != "" {
		if c.ModelPace, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("TURNGATE_MODEL_PACE: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_WEBHOOKS"); v != "" {
		c.Webhooks = map[string]string{}
		for _, pair := range strings.Split(v, ",") {
			name, url, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || name == "" || !(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
				return c, fmt.Errorf("TURNGATE_WEBHOOKS: want name=http(s)://url pairs, got %q", pair)
			}
			c.Webhooks[name] = url
		}
	}
	if v := os.Getenv("TURNGATE_APPROVAL_TIMEOUT"); v != "" {
		if c.ApprovalTimeout, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("TURNGATE_APPROVAL_TIMEOUT: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_OPENAI_MAX_RETRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c, fmt.Errorf("TURNGATE_OPENAI_MAX_RETRIES: want a count of 0 or more, got %q", v)
		}
		// The gateway reads zero as its default and a negative count as
		// none.
		c.OpenAI.MaxRetries = n
		if n == 0 {
			c.OpenAI.MaxRetries = -1
		}
	}
	if v := os.Getenv("TURNGATE_OPENAI_IDLE_TIMEOUT"); v != "" {
		if c.OpenAI.IdleTimeout, err = time.ParseDuration(v); err != nil || c.OpenAI.IdleTimeout <= 0 {
			return c, fmt.Errorf("TURNGATE_OPENAI_IDLE_TIMEOUT: want a positive duration, got %q", v)
		}
	}
	if v := os.Getenv("TURNGATE_OPENAI_EFFORT"); v != "" {
		if c.OpenAI.Effort, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("TURNGATE_OPENAI_EFFORT: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_DRAIN"); v != "" {
		if c.Drain, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("TURNGATE_DRAIN: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"TURNGATE_ENVELOPE_MAX_LIFETIME", &c.EnvelopeMaxLifetime}, {"TURNGATE_ENVELOPE_JWKS_REFRESH", &c.EnvelopeJWKSRefresh}} {
		if v := os.Getenv(d.name); v != "" {
			if *d.to, err = time.ParseDuration(v); err != nil || *d.to <= 0 {
				return c, fmt.Errorf("%s: want a positive duration, got %q", d.name, v)
			}
		}
	}
	if v := os.Getenv("TURNGATE_LEASE_TTL"); v != "" {
		if c.LeaseTTL, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("TURNGATE_LEASE_TTL: %w", err)
		}
	}
	if v := os.Getenv("TURNGATE_DB_MAX_CONNS"); v != "" {
		if c.DBMaxConns, err = strconv.Atoi(v); err != nil || c.DBMaxConns < 2 {
			return c, fmt.Errorf("TURNGATE_DB_MAX_CONNS: want a number of at least 2, got %q", v)
		}
	}
	if v := os.Getenv("TURNGATE_MAX_TEXT"); v != "" {
		if c.MaxTextLen, err = strconv.Atoi(v); err != nil || c.MaxTextLen < 1 {
			return c, fmt.Errorf("TURNGATE_MAX_TEXT: want a positive number, got %q", v)
		}
	}
	if v := os.Getenv("TURNGATE_ALLOWED_ORIGINS"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.AllowedOrigins = append(c.AllowedOrigins, o)
			}
		}
	}
	for _, v := range c.Limits.vars() {
		if s := os.Getenv(v.name); s != "" {
			if err := v.parse(s); err != nil {
				return c, err
			}
		}
	}
	if v := os.Getenv("TURNGATE_INTROSPECTION"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("TURNGATE_INTROSPECTION: %w", err)
		}
		c.Limits.NoIntrospection = !on
	}
	if v := os.Getenv("TURNGATE_SUGGESTIONS"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("TURNGATE_SUGGESTIONS: %w", err)
		}
		c.Limits.Suggestions = &on
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	return c, nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Check refuses a configuration a server could start with but should
// not, naming what to set: dev mode on an address other hosts reach, a
// model route no provider serves (every turn would fail runtime_failed,
// explained only in the log), profiles without an operators' address.
// serve runs it before anything starts; the database and the envelope
// key are checked as they are opened, and the listener's bound address
// by Listen.
func (c Config) Check() error {
	if c.Dev() && !c.DevAllowPublicListener && c.Addr != "" && publicListenAddr(c.Addr) {
		return devListenerError(c.Addr)
	}
	if c.Pprof && c.MetricsAddr == "" {
		return fmt.Errorf("TURNGATE_PPROF needs TURNGATE_METRICS_ADDR: Go's profiles are served on the operators' address only, never on the API's")
	}
	switch c.DBPooler {
	case "":
	case PoolerTransaction:
		if c.DatabaseURL == "" || c.DirectDatabaseURL == "" {
			return fmt.Errorf("TURNGATE_DB_POOLER=transaction needs DATABASE_URL (through the pooler) and TURNGATE_DIRECT_DATABASE_URL (to Postgres itself: LISTEN and the migrations need a session)")
		}
	default:
		return fmt.Errorf("TURNGATE_DB_POOLER %q: want transaction, or unset for a direct connection or a pooler in session mode", c.DBPooler)
	}
	route := c.AgentRoute
	if route == "" || route == "builtin" {
		return nil
	}
	name, model, _ := strings.Cut(route, ":")
	if name != "openai" {
		return fmt.Errorf("TURNGATE_AGENT_ROUTE %q: want builtin, openai or openai:<model>", route)
	}
	if c.OpenAI.BaseURL == "" && c.OpenAI.APIKey == "" {
		return fmt.Errorf("TURNGATE_AGENT_ROUTE %q needs an endpoint: set TURNGATE_OPENAI_BASE_URL (a compatible server) or TURNGATE_OPENAI_API_KEY (OpenAI)", route)
	}
	if model == "" && c.OpenAI.Model == "" {
		return fmt.Errorf("TURNGATE_AGENT_ROUTE %q names no model: set TURNGATE_OPENAI_MODEL or use openai:<model>", route)
	}
	return nil
}

// publicListenAddr reports whether a listen address, as written, reaches
// beyond this machine: every interface (no host, 0.0.0.0, ::) or an IP
// that is not loopback. A name other than localhost is not resolved
// here; Listen checks the address it binds.
func publicListenAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return !ip.IsLoopback()
	}
	return false
}

// devListenerError is the refusal of dev mode on an address other hosts
// reach, saying what to do instead (DESIGN §13).
func devListenerError(addr string) error {
	return fmt.Errorf("dev mode (no TURNGATE_ENVELOPE_PUBLIC_KEY or TURNGATE_ENVELOPE_JWKS_URL: the server signs envelopes with its own dev key "+
		"and seeds the demo, whose operator holds every admin permission) listens on loopback only, and the listen address is %s. "+
		"Listen on 127.0.0.1 or [::1] (TURNGATE_ADDR, --addr); or, for a real deployment, set TURNGATE_ENVELOPE_PUBLIC_KEY or "+
		"TURNGATE_ENVELOPE_JWKS_URL to your platform's key; or, to expose dev mode anyway, set "+
		"TURNGATE_DEV_ALLOW_PUBLIC_LISTENER=%s (the pages that carry envelopes still go to loopback peers only)", addr, devAllowPublicListener)
}
