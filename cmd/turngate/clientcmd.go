package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/turngate/turngate/server"

	"github.com/turngate/turngate/authority"
	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/clients/go/chat"
)

// exitCode is an error that sets the process's exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// clientFlags are the flags every command that speaks to a server takes:
// where it is, and who the caller is.
type clientFlags struct {
	url, as, data string
}

// newClientFlags are the client flags at their defaults: the server at
// TURNGATE_ADDR, the data folder TURNGATE_DATA names.
func newClientFlags(cfg server.Config) *clientFlags {
	return &clientFlags{url: "http://" + cfg.Addr + "/graphql", data: cfg.DataDir}
}

// register declares the flags on fs with their current values as
// defaults, so a command's flag set can take them again after the ones
// given before the command.
func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", f.url, "the server's GraphQL endpoint")
	fs.StringVar(&f.as, "as", f.as, "dev mode: act as this member, minting the envelope with the data folder's dev key (otherwise the envelope is TURNGATE_IDENTITY)")
	fs.StringVar(&f.data, "data", f.data, "the server's data folder, for --as (TURNGATE_DATA)")
}

// parseAnywhere parses args with fs wherever the flags are, before,
// between or after the other words (the flag package stops at the first
// word that is not a flag), and returns those words in order. After
// "--", every word is one of them.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return words, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(words, rest...), nil
		}
		words, args = append(words, rest[0]), rest[1:]
	}
}

// errorLine is how the command prog reports err on stderr. The Go
// client's errors name it ("turngate: CODE: message"); after the
// command's own name that would say turngate twice.
func errorLine(prog string, err error) string {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = strings.Replace(msg, ce.Error(), fmt.Sprintf("%s: %s", ce.Code, ce.Message), 1)
	}
	return prog + ": " + msg
}

// client connects as the flags say.
func (f *clientFlags) client(cfg server.Config) (*client.Client, error) {
	url := f.url
	if !strings.Contains(url, "/graphql") {
		url = strings.TrimSuffix(url, "/") + "/graphql"
	}
	var identity client.IdentityFunc
	switch {
	case f.as != "":
		cfg.DataDir = f.data
		tok, err := devEnvelope(cfg, f.as, min(24*time.Hour, cfg.EnvelopeLifetime()))
		if err != nil {
			return nil, err
		}
		identity = client.Static(tok)
	case os.Getenv("TURNGATE_IDENTITY") != "":
		identity = func(context.Context, bool) (string, error) { return os.Getenv("TURNGATE_IDENTITY"), nil }
	default:
		return nil, errors.New("who are you? pass --as EMAIL (dev mode) or set TURNGATE_IDENTITY to your identity envelope")
	}
	return client.New(client.Config{URL: url, Identity: identity, Header: cfg.IdentityHeader}), nil
}

// devEnvelope mints a dev envelope for email with the dev key of the
// data folder: only the key the server there verifies with, never a new
// one, which would mint envelopes the server rejects.
func devEnvelope(cfg server.Config, email string, ttl time.Duration) (string, error) {
	if !cfg.Dev() {
		return "", errors.New("envelopes are minted by the platform when TURNGATE_ENVELOPE_PUBLIC_KEY is set")
	}
	if max := cfg.EnvelopeLifetime(); ttl > max {
		return "", fmt.Errorf("an envelope of %v would be refused: the server accepts envelopes of at most %v (TURNGATE_ENVELOPE_MAX_LIFETIME)", ttl, max)
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return "", err
	}
	key, err := authority.LoadDevKey(dir)
	if errors.Is(err, authority.ErrNoDevKey) {
		return "", fmt.Errorf("no dev key in %s: start the server there first (make run), or point at its data folder with --data or TURNGATE_DATA", dir)
	}
	if err != nil {
		return "", err
	}
	return server.MintDev(authority.NewSigner(cfg.EnvelopeIssuer, cfg.EnvelopeAud, key), email, ttl)
}

// chatCmd is `turngate chat`: the terminal chat, or with -m one message
// whose answer streams to stdout (exit 0 completed, 1 failed, 2
// cancelled, 3 not sent).
func chatCmd(ctx context.Context, cfg server.Config, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	cf := newClientFlags(cfg)
	cf.register(fs)
	room := fs.String("room", "", "open this room (its UUID, WEB_ channel or public key)")
	newRoom := fs.Bool("new", false, "create a private room and open it")
	message := fs.String("m", "", "send this message, print the answer and exit (needs --room)")
	words, err := parseAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(words) > 0 {
		return fmt.Errorf("chat takes flags only, not %q (quote a message: -m \"...\")", words[0])
	}
	c, err := cf.client(cfg)
	if err != nil {
		return err
	}
	if *message != "" {
		if *room == "" {
			return errors.New("chat -m needs --room")
		}
		code, err := chat.Once(ctx, c, *room, *message, stdout, stderr)
		if err != nil {
			fmt.Fprintln(stderr, errorLine("turngate chat", err))
		}
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	return chat.Run(ctx, chat.Options{Client: c, Room: *room, New: *newRoom, In: stdin, Out: stdout})
}
