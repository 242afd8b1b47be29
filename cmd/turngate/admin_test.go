package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/servertest"
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
