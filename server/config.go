package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turngate/turngate/gateway"
)

// Config is the server's configuration: embedded defaults, overridden by
// environment variables, overridden by flags.
type Config struct {
	// Addr is the HTTP listen address (TURNGATE_ADDR).
	Addr string
	// DataDir holds the embedded Postgres and the dev signing key
	// (TURNGATE_DATA).
	DataDir string
	// DatabaseURL, when set, is used instead of the embedded Postgres
	// (DATABASE_URL).
	DatabaseURL string
	// IdentityHeader carries the identity envelope (TURNGATE_IDENTITY_HEADER).
	IdentityHeader string
	// EnvelopeKeyFile is the PKIX PEM public key of the platform that signs
	// envelopes (TURNGATE_ENVELOPE_PUBLIC_KEY). Empty: dev mode, with a
	// signing key kept in DataDir.
	EnvelopeKeyFile string
	EnvelopeIssuer  string // TURNGATE_ENVELOPE_ISSUER
	EnvelopeAud     string // TURNGATE_ENVELOPE_AUDIENCE
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
}

// Dev reports whether envelopes are verified with the dev key.
func (c Config) Dev() bool { return c.EnvelopeKeyFile == "" }

const (
	devIssuer   = "turngate-dev"
	devAudience = "turngate"
)

// ConfigFromEnv reads the configuration from the environment.
func ConfigFromEnv() (Config, error) {
	c := Config{
		Addr:            env("TURNGATE_ADDR", "127.0.0.1:8080"),
		DataDir:         env("TURNGATE_DATA", ".turngate"),
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		IdentityHeader:  env("TURNGATE_IDENTITY_HEADER", "X-Turngate-Identity"),
		EnvelopeKeyFile: os.Getenv("TURNGATE_ENVELOPE_PUBLIC_KEY"),
		EnvelopeIssuer:  env("TURNGATE_ENVELOPE_ISSUER", devIssuer),
		EnvelopeAud:     env("TURNGATE_ENVELOPE_AUDIENCE", devAudience),
		MaxTextLen:      16000,
		ModelPace:       25 * time.Millisecond,
		LeaseTTL:        30 * time.Second,
		Drain:           10 * time.Second,
		Replica:         os.Getenv("TURNGATE_REPLICA"),
		AgentRoute:      os.Getenv("TURNGATE_AGENT_ROUTE"),
		OpenAI: gateway.OpenAIConfig{
			BaseURL: os.Getenv("TURNGATE_OPENAI_BASE_URL"),
			APIKey:  os.Getenv("TURNGATE_OPENAI_API_KEY"),
			Model:   os.Getenv("TURNGATE_OPENAI_MODEL"),
		},
	}
	c.Demo = c.Dev()
	var err error
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
	if v := os.Getenv("TURNGATE_LEASE_TTL"); v != "" {
		if c.LeaseTTL, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("TURNGATE_LEASE_TTL: %w", err)
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
