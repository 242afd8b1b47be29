package server

import (
	"cmp"
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
// default; each has an environment variable, listed in Config.settings and
// in the README's "Limits and errors".
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
	// SandboxLazy starts run_code's workers when scripts first need them
	// rather than with the server (TURNGATE_SANDBOX_LAZY, false).
	SandboxLazy bool
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

// ConfigFromEnv reads the configuration from the environment, one setting
// of Config.settings at a time, in the table's order.
func ConfigFromEnv() (Config, error) {
	var c Config
	for _, s := range c.settings() {
		switch v := cmp.Or(os.Getenv(s.name), s.def); {
		case v != "":
			if err := s.set(v); err != nil {
				return c, fmt.Errorf("%s: %w", s.name, err)
			}
		case s.unset != nil:
			s.unset()
		}
	}
	return c, nil
}

// setting is one environment variable of the configuration.
type setting struct {
	// name is the variable.
	name string
	// def is the value an unset or empty variable stands for, spelled as
	// the variable would spell it; "" leaves the field at its zero value
	// (for a limit, Limits.WithDefaults then gives it its default).
	def string
	// set parses and checks a value, and writes it into its field. Its
	// error names the value, not the variable: ConfigFromEnv adds that.
	set func(v string) error
	// unset, when not nil, is what an unset or empty variable without a
	// def means: a default that depends on the settings read before it.
	unset func()
	// doc says what the setting is, and its default when def does not.
	doc string
}

// settings is the configuration's table: each variable, its default, and
// where and how it is read into c. ConfigFromEnv reads them in this order,
// and the first that does not parse is its error. The README's
// Configuration and "Limits and errors" tables list the same variables
// (TestEverySettingIsInTheREADME, TestTheREADMEListsTheSettings).
func (c *Config) settings() []setting {
	l := &c.Limits
	return []setting{
		{name: "TURNGATE_ADDR", def: "127.0.0.1:8080", set: text(&c.Addr),
			doc: "the HTTP listen address; in dev mode a loopback one"},
		{name: "TURNGATE_METRICS_ADDR", set: text(&c.MetricsAddr),
			doc: "serves /metrics (and the health checks, and the profiles) on an address of its own"},
		{name: "TURNGATE_LOG_LEVEL", def: "info", set: text(&c.LogLevel),
			doc: "the least level logged: debug, info, warn or error"},
		{name: "TURNGATE_LOG_FORMAT", set: text(&c.LogFormat),
			doc: "json or text (default json, text in dev mode)"},
		{name: "TURNGATE_DATA", def: ".turngate", set: c.setDataDir,
			doc: "the data folder: the embedded Postgres and the dev signing key"},
		{name: "DATABASE_URL", set: text(&c.DatabaseURL),
			doc: "a Postgres to use instead of the embedded one"},
		{name: "TURNGATE_DB_POOLER", set: text(&c.DBPooler),
			doc: "transaction, when DATABASE_URL goes through a pooler in transaction mode (Check reads it)"},
		{name: "TURNGATE_DIRECT_DATABASE_URL", set: text(&c.DirectDatabaseURL),
			doc: "Postgres past the pooler, for LISTEN and the migrations"},
		{name: "TURNGATE_IDENTITY_HEADER", def: "X-Turngate-Identity", set: text(&c.IdentityHeader),
			doc: "the header that carries the identity envelope"},
		{name: "TURNGATE_ENVELOPE_PUBLIC_KEY", set: text(&c.EnvelopeKeyFile),
			doc: "the PEM public key of the platform that signs envelopes (unset with no JWKS URL: dev mode)"},
		{name: "TURNGATE_ENVELOPE_JWKS_URL", set: text(&c.EnvelopeJWKSURL),
			doc: "an identity provider's key set, instead of one key"},
		{name: "TURNGATE_ENVELOPE_ISSUER", def: DevIssuer, set: text(&c.EnvelopeIssuer),
			doc: "the envelopes' required iss"},
		{name: "TURNGATE_ENVELOPE_AUDIENCE", def: DevAudience, set: text(&c.EnvelopeAud),
			doc: "the envelopes' required aud"},
		{name: "TURNGATE_REPLICA", set: text(&c.Replica),
			doc: "this replica's name in leases (default random)"},
		{name: "TURNGATE_AGENT_ROUTE", set: text(&c.AgentRoute),
			doc: "the default agent's model route: builtin, openai or openai:<model> (Check reads it)"},
		{name: "TURNGATE_OPENAI_BASE_URL", set: text(&c.OpenAI.BaseURL),
			doc: "an OpenAI-compatible Chat Completions endpoint"},
		{name: "TURNGATE_OPENAI_API_KEY", set: text(&c.OpenAI.APIKey),
			doc: "the endpoint's key"},
		{name: "TURNGATE_OPENAI_MODEL", set: text(&c.OpenAI.Model),
			doc: "the model when the route names none"},

		// Consent to expose dev mode is spelled out, never a truthy value
		// someone copied from another setting.
		{name: "TURNGATE_DEV_ALLOW_PUBLIC_LISTENER", set: c.setDevAllowPublicListener,
			doc: "the one value " + devAllowPublicListener + " lets dev mode listen on an address other hosts reach"},
		{name: "TURNGATE_PPROF", set: boolean(&c.Pprof),
			doc: "serves Go's profiles on TURNGATE_METRICS_ADDR (default false)"},
		// After the envelope's settings: whether this is dev mode.
		{name: "TURNGATE_DEMO", set: boolean(&c.Demo), unset: func() { c.Demo = c.Dev() },
			doc: "seeds the demo data set (default on in dev mode)"},
		{name: "TURNGATE_NO_RUNNER", set: boolean(&c.NoRunner),
			doc: "serves the API without claiming turns (default false)"},
		{name: "TURNGATE_MODEL_PACE", def: "25ms", set: duration(&c.ModelPace),
			doc: "the builtin model's delay between tokens"},
		{name: "TURNGATE_WEBHOOKS", set: c.setWebhooks,
			doc: "send_webhook's endpoints, name=url,name=url (default none: it refuses every call)"},
		{name: "TURNGATE_APPROVAL_TIMEOUT", set: duration(&c.ApprovalTimeout),
			doc: "how long a proposed effect waits for a decision (default the runner's, 10m)"},
		{name: "TURNGATE_OPENAI_MAX_RETRIES", set: c.setOpenAIMaxRetries,
			doc: "retries of a refused request to the endpoint (default the gateway's, 2)"},
		{name: "TURNGATE_OPENAI_IDLE_TIMEOUT", set: positiveDuration(&c.OpenAI.IdleTimeout),
			doc: "the longest wait for the endpoint's headers or next stream data (default the gateway's, 60s)"},
		{name: "TURNGATE_OPENAI_EFFORT", set: boolean(&c.OpenAI.Effort),
			doc: "sends reasoning effort, to endpoints that take it (default false)"},
		{name: "TURNGATE_DRAIN", def: "10s", set: duration(&c.Drain),
			doc: "how long an orderly stop lets runs in flight finish"},
		{name: "TURNGATE_ENVELOPE_MAX_LIFETIME", set: positiveDuration(&c.EnvelopeMaxLifetime),
			doc: "the longest an envelope may live (default EnvelopeLifetime's: 24h, 720h in dev mode)"},
		{name: "TURNGATE_ENVELOPE_JWKS_REFRESH", set: positiveDuration(&c.EnvelopeJWKSRefresh),
			doc: "how often the key set is read again (default authority.DefaultJWKSRefresh)"},
		{name: "TURNGATE_LEASE_TTL", def: "30s", set: duration(&c.LeaseTTL),
			doc: "a run's lease"},
		{name: "TURNGATE_DB_MAX_CONNS", set: atLeast(&c.DBMaxConns, 2, "a number of at least 2"),
			doc: "this replica's database connection pool (default DefaultDBMaxConns)"},
		{name: "TURNGATE_MAX_TEXT", def: "16000", set: atLeast(&c.MaxTextLen, 1, "a positive number"),
			doc: "the longest message, in characters"},
		{name: "TURNGATE_ALLOWED_ORIGINS", set: c.setAllowedOrigins,
			doc: "extra Origin patterns accepted on WebSocket upgrades, comma separated"},

		// The limits: zero means Limits.WithDefaults's default.
		{name: "TURNGATE_MAX_BODY", set: size(&l.MaxBody),
			doc: "an HTTP request body and a WebSocket message, in bytes (1MiB)"},
		{name: "TURNGATE_MAX_QUERY", set: size(&l.MaxQuery),
			doc: "a GraphQL query document, in bytes (64KiB)"},
		{name: "TURNGATE_QUERY_CACHE", set: size(&l.QueryCache),
			doc: "the parsed-query cache, in weighed bytes (16MiB)"},
		{name: "TURNGATE_MAX_DEPTH", set: integer(&l.MaxDepth),
			doc: "the nesting of a query's selections (15)"},
		{name: "TURNGATE_MAX_FIELDS", set: integer(&l.MaxFields),
			doc: "the selections of a query document (500)"},
		{name: "TURNGATE_MAX_FRAGMENTS", set: integer(&l.MaxFragments),
			doc: "the fragment definitions of a query document (100)"},
		{name: "TURNGATE_MAX_TOKENS", set: integer(&l.MaxTokens),
			doc: "the tokens of a member's query document (40000)"},
		{name: "TURNGATE_MAX_TOKENS_ANONYMOUS", set: integer(&l.AnonMaxTokens),
			doc: "the tokens of a query document without an envelope (1000)"},
		{name: "TURNGATE_PARSE_BUDGET", set: size(&l.ParseBudget),
			doc: "the query documents being parsed at once, in weighed bytes (64MiB)"},
		{name: "TURNGATE_ANONYMOUS_REQUESTS", set: integer(&l.AnonRequests),
			doc: "the requests without an envelope served at once (1)"},
		{name: "TURNGATE_WS_INIT_TIMEOUT", set: duration(&l.WSInitTimeout),
			doc: "the wait for connection_init (10s)"},
		{name: "TURNGATE_WS_PING", set: duration(&l.WSPing),
			doc: "how often streams are pinged (15s)"},
		{name: "TURNGATE_MAX_SUBSCRIPTIONS", set: integer(&l.MaxSubscriptions),
			doc: "the subscriptions on one WebSocket (100)"},
		{name: "TURNGATE_MAX_STREAMS_PER_MEMBER", set: integer(&l.MaxStreams),
			doc: "one member's open streams on this replica (50)"},
		{name: "TURNGATE_READ_HEADER_TIMEOUT", set: duration(&l.ReadHeaderTimeout),
			doc: "reading a request's headers (10s)"},
		{name: "TURNGATE_READ_TIMEOUT", set: duration(&l.ReadTimeout),
			doc: "reading a whole request (30s)"},
		{name: "TURNGATE_IDLE_TIMEOUT", set: duration(&l.IdleTimeout),
			doc: "an idle keep-alive connection (120s)"},
		{name: "TURNGATE_COMMAND_RATE", set: float(&l.CommandRate),
			doc: "a member's commands per second, refilling the bucket (5)"},
		{name: "TURNGATE_COMMAND_BURST", set: integer(&l.CommandBurst),
			doc: "a member's bucket of commands (30)"},
		{name: "TURNGATE_SANDBOX_MEMORY", set: size(&l.SandboxMemory),
			doc: "one run_code script's memory, in bytes (128MiB)"},
		{name: "TURNGATE_SANDBOX_WORKERS", set: integer(&l.SandboxWorkers),
			doc: "the run_code scripts running at once (4)"},
		{name: "TURNGATE_SANDBOX_QUEUE", set: integer(&l.SandboxQueue),
			doc: "the run_code scripts waiting for a worker (64)"},
		{name: "TURNGATE_SANDBOX_WALL_TIME", set: duration(&l.SandboxWallTime),
			doc: "one run_code script's run (2s)"},
		{name: "TURNGATE_SANDBOX_LAZY", set: boolean(&l.SandboxLazy),
			doc: "true starts run_code's workers on first use, not with the server (default false)"},
		{name: "TURNGATE_INTROSPECTION", set: c.setIntrospection,
			doc: "false refuses introspection queries (default true)"},
		{name: "TURNGATE_SUGGESTIONS", set: c.setSuggestions,
			doc: "adds \"did you mean\" hints to validation errors (default on in dev mode only)"},
	}
}

// The settings' parsers: each writes one kind of value into its field.

func text(p *string) func(string) error {
	return func(v string) error { *p = v; return nil }
}

func boolean(p *bool) func(string) error {
	return func(v string) (err error) { *p, err = strconv.ParseBool(v); return err }
}

func duration(p *time.Duration) func(string) error {
	return func(v string) (err error) { *p, err = time.ParseDuration(v); return err }
}

func positiveDuration(p *time.Duration) func(string) error {
	return func(v string) (err error) {
		if *p, err = time.ParseDuration(v); err != nil || *p <= 0 {
			return fmt.Errorf("want a positive duration, got %q", v)
		}
		return nil
	}
}

func integer(p *int) func(string) error {
	return func(v string) (err error) { *p, err = strconv.Atoi(v); return err }
}

// atLeast reads a number no less than least; want says so in the error.
func atLeast(p *int, least int, want string) func(string) error {
	return func(v string) (err error) {
		if *p, err = strconv.Atoi(v); err != nil || *p < least {
			return fmt.Errorf("want %s, got %q", want, v)
		}
		return nil
	}
}

func float(p *float64) func(string) error {
	return func(v string) (err error) { *p, err = strconv.ParseFloat(v, 64); return err }
}

// size reads bytes: 1048576, 1024KiB, 1MiB.
func size(p *int64) func(string) error {
	return func(v string) (err error) { *p, err = parseBytes(v); return err }
}

// The settings that parse or check more than one value.

func (c *Config) setDataDir(v string) error {
	c.DataDir = v
	if abs, err := filepath.Abs(v); err == nil {
		c.DataDir = abs
	}
	return nil
}

func (c *Config) setDevAllowPublicListener(v string) error {
	if v != devAllowPublicListener {
		return fmt.Errorf("the only value is %s, got %q", devAllowPublicListener, v)
	}
	c.DevAllowPublicListener = true
	return nil
}

func (c *Config) setWebhooks(v string) error {
	c.Webhooks = map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		name, url, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" || !(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
			return fmt.Errorf("want name=http(s)://url pairs, got %q", pair)
		}
		c.Webhooks[name] = url
	}
	return nil
}

func (c *Config) setOpenAIMaxRetries(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count of 0 or more, got %q", v)
	}
	// The gateway reads zero as its default and a negative count as none.
	c.OpenAI.MaxRetries = n
	if n == 0 {
		c.OpenAI.MaxRetries = -1
	}
	return nil
}

func (c *Config) setAllowedOrigins(v string) error {
	for _, o := range strings.Split(v, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowedOrigins = append(c.AllowedOrigins, o)
		}
	}
	return nil
}

func (c *Config) setIntrospection(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	c.Limits.NoIntrospection = !on
	return nil
}

func (c *Config) setSuggestions(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	c.Limits.Suggestions = &on
	return nil
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
