package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/demo"
)

// NewLogger is the server's structured log: JSON lines (one object per
// line, for a log pipeline) outside dev mode, text in dev mode, at
// TURNGATE_LOG_LEVEL (debug, info, warn, error; default info);
// TURNGATE_LOG_FORMAT (json, text) overrides the format.
func NewLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("TURNGATE_LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if cfg.Dev() {
			format = "text"
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("TURNGATE_LOG_FORMAT: %q is neither json nor text", format)
}

// MintDev mints a dev envelope for email. Demo members keep their demo
// names; anyone else is named after the email's local part.
func MintDev(s *authority.Signer, email string, ttl time.Duration) (string, error) {
	email = authority.LowerASCII(strings.TrimSpace(email))
	name, _, _ := strings.Cut(email, "@")
	for _, d := range demo.People {
		if d.Email == email {
			name = d.Name
		}
	}
	return s.Mint(authority.Identity{Subject: authority.DevSubject(email), Email: email, DisplayName: name}, ttl)
}

// EmbeddedDir is where the private Postgres of a data folder lives.
func EmbeddedDir(cfg Config) string { return cfg.DataDir + "/postgres" }
