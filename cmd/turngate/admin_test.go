package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

const (
	alice   = "alice@example.com"
	bob     = "bob@example.com"
	mallory = "mallory@example.com"
)

// TestAdminEventsList: `turngate admin events list` prints the admin
// record, newest first, at most --limit changes; an operator with no
// admin permission is refused, naming what it needs.
func TestAdminEventsList(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	for _, who := range []string{bob, mallory} {
		if err := h.Client(t, who).Do(ctx, `{ me { id } }`, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`mutation { setMemberRoster(input: {email: "bob@example.com", agent: "assistant", specialists: ["researcher"]}) { id } }`,
		`mutation { grantPermission(input: {email: "bob@example.com", permission: "admin:agents"}) { id } }`,
	} {
		if err := a.Do(ctx, q, nil, nil); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// `turngate admin events list` prints the record, newest first.
	var out, errOut bytes.Buffer
	if err := adminCmd(ctx, h.Config, []string{"--url", h.Base, "--as", alice, "events", "list", "--limit", "2"}, &out, &errOut); err != nil {
		t.Fatalf("admin events list: %v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "grant_permission") || !strings.Contains(lines[1], "admin:agents") ||
		!strings.Contains(lines[2], "set_member_roster") {
		t.Fatalf("admin events list --limit 2:\n%s", out.String())
	}
	if err := adminCmd(ctx, h.Config, []string{"--url", h.Base, "--as", mallory, "events", "list"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "admin:members") {
		t.Fatalf("admin events list as mallory: %v", err)
	}
}

// TestAdminFlagsAnywhere: flags go where users put them, after the
// subcommand too (as kubectl, gh and docker take them); an unknown
// subcommand is an error (a non-zero exit), not the usage.
func TestAdminFlagsAnywhere(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "flags.md")
	if err := os.WriteFile(file, []byte("# Flags anywhere\n\nThe flags come after the subcommand.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := adminCmd(ctx, h.Config, args, &out, &errOut)
		return out.String() + errOut.String(), err
	}

	// Every flag after the subcommand, some after its argument.
	out, err := admin("docs", "add", "--url", h.Base, "--as", alice, file, "--reader", alice)
	if err != nil || !strings.Contains(out, "Flags anywhere") {
		t.Fatalf("docs add with the flags after it: %v\n%s", err, out)
	}
	// The global flags before, the subcommand's after, and `--url=` form.
	if out, err = admin("--as", alice, "docs", "list", "--url="+h.Base); err != nil || !strings.Contains(out, "Flags anywhere") || !strings.Contains(out, alice) {
		t.Fatalf("docs list: %v\n%s", err, out)
	}
	// After --, a flag-like word is an argument.
	if out, err = admin("docs", "add", "--url", h.Base, "--as", alice, "--", "--reader"); err == nil || !strings.Contains(err.Error(), "--reader") {
		t.Fatalf("docs add -- --reader = %v, want the file --reader not found\n%s", err, out)
	}

	// An unknown subcommand or a missing verb: an error naming it, not the usage's exit 0.
	for _, args := range [][]string{
		{"--url", h.Base, "--as", alice, "docs", "ls"},
		{"docs", "ls", "--as", alice},
		{"--as", alice, "docs"},
		{"frobnicate", "now"},
	} {
		_, err := admin(args...)
		if err == nil || errors.Is(err, flag.ErrHelp) || !strings.Contains(err.Error(), "unknown admin command") {
			t.Errorf("admin %s = %v, want an unknown admin command error", strings.Join(args, " "), err)
		}
	}
	// No command at all prints the usage.
	if _, err := admin(); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("admin with no command = %v, want the usage (flag.ErrHelp)", err)
	}
}

// TestChatRefusesStrayArguments: every word of chat's command line is a
// flag or a flag's value; a stray word (an unquoted message) is an error,
// not silently dropped.
func TestChatRefusesStrayArguments(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := chatCmd(context.Background(), server.Config{Addr: "127.0.0.1:1"}, []string{"--room", "r", "-m", "hello", "world", "--as", alice}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `"world"`) {
		t.Fatalf("chat -m hello world = %v, want an error naming the stray word", err)
	}
}

// TestErrorLine: an error the client returns reads "turngate: CODE:
// message" once, never "turngate: turngate:".
func TestErrorLine(t *testing.T) {
	t.Parallel()
	ce := &client.Error{Code: client.Forbidden, Message: "you lack admin:documents"}
	for _, tc := range []struct {
		prog string
		err  error
		want string
	}{
		{"turngate", ce, "turngate: FORBIDDEN: you lack admin:documents"},
		{"turngate", fmt.Errorf("handbook/a.md: %w", ce), "turngate: handbook/a.md: FORBIDDEN: you lack admin:documents"},
		{"turngate chat", ce, "turngate chat: FORBIDDEN: you lack admin:documents"},
		{"turngate", errors.New("token: --email is required"), "turngate: token: --email is required"},
	} {
		if got := errorLine(tc.prog, tc.err); got != tc.want {
			t.Errorf("errorLine(%q, %v) = %q, want %q", tc.prog, tc.err, got, tc.want)
		}
	}
}
