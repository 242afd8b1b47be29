package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestProductionSeedsNoDemoData: a server outside demo mode seeds
// nothing — no demo agent, members, rooms or documents — so a room can
// name only an agent the deployment was given, and one that names the
// default agent it was not given is a clear BAD_USER_INPUT that stores
// nothing.
func TestProductionSeedsNoDemoData(t *testing.T) {
	t.Parallel()
	var platformSigner *authority.Signer
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true
		c.Demo = false
		c.EnvelopeKeyFile, platformSigner = servertest.PlatformKey(t, c.EnvelopeIssuer, c.EnvelopeAud)
	})
	count := func(table string) int {
		t.Helper()
		var n int
		if err := h.DB.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, table := range []string{"agents", "agent_versions", "members", "conversations", "documents"} {
		if n := count(table); n != 0 {
			t.Errorf("%s: %d rows in production, want none", table, n)
		}
	}
	tok, err := server.MintDev(platformSigner, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := h.ClientWithToken(tok)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.Raw(ctx, gqlclient.Request{Query: `mutation { createConversation(input: {title: "t", kind: PRIVATE}) { id } }`})
	if err != nil {
		t.Fatal(err)
	}
	servertest.CheckCoded(t, res.Errors, "BAD_USER_INPUT")
	if !strings.Contains(res.Errors[0].Message, "agent") {
		t.Errorf("message %q does not name the missing agent", res.Errors[0].Message)
	}
	if n := count("conversations"); n != 0 {
		t.Errorf("conversations after the refused create: %d, want none", n)
	}
}
