package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestEnvelopeRejected: every way an envelope can be wrong is
// UNAUTHENTICATED, over HTTP and over a WebSocket upgrade.
func TestEnvelopeRejected(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	now := time.Now()
	good := map[string]any{
		"sub": authority.DevSubject(alice), "email": alice, "email_verified": true, "name": "Alice",
		"iss": h.Config.EnvelopeIssuer, "aud": h.Config.EnvelopeAud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for key, val := range good {
			c[key] = val
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	mint := func(s *authority.Signer, claims map[string]any) string {
		tok, err := s.MintClaims(claims)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name  string
		token string
	}{
		{"missing", ""},
		{"garbage", "not-a-jwt"},
		{"expired", mint(h.Signer, with("exp", now.Add(-time.Hour).Unix()))},
		{"wrong signature", mint(otherKeySigner(t, h.Config.EnvelopeIssuer, h.Config.EnvelopeAud), good)},
		{"wrong audience", mint(h.Signer, with("aud", "someone-else"))},
		{"wrong issuer", mint(h.Signer, with("iss", "someone-else"))},
		{"email not verified", mint(h.Signer, with("email_verified", false))},
		{"email_verified absent", mint(h.Signer, with("email_verified", nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := h.ClientWithToken(tt.token).Do(context.Background(), `{ me { email } }`, nil, nil)
			if code := gqlclient.CodeOf(err); code != "UNAUTHENTICATED" {
				t.Fatalf("HTTP: err = %v, want UNAUTHENTICATED", err)
			}
			hdr := http.Header{}
			if tt.token != "" {
				hdr.Set(h.Config.IdentityHeader, tt.token)
			}
			assertSubscriptionCode(t, h, hdr, nil, "UNAUTHENTICATED")
		})
	}

	// The good envelope works, and its email comes back lowercased.
	var me struct {
		Me struct{ Email, DisplayName string } `json:"me"`
	}
	if err := h.ClientWithToken(mint(h.Signer, with("email", "Alice@Example.COM"))).Do(context.Background(), `{ me { email displayName } }`, nil, &me); err != nil {
		t.Fatal(err)
	}
	if me.Me.Email != alice || me.Me.DisplayName != "Alice" {
		t.Fatalf("me = %+v", me.Me)
	}
}

// assertSubscriptionCode subscribes to the journal of alice's first room
// over graphql-transport-ws with the given upgrade header and init
// payload, and expects an error with code.
func assertSubscriptionCode(t *testing.T, h *servertest.Harness, hdr http.Header, initPayload any, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := gqlclient.Dial(ctx, h.Base+"/graphql", hdr, initPayload)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]
	msgs, err := conn.Subscribe(ctx, "1", gqlclient.Request{
		Query:     `subscription($c: ID!) { journal(conversationId: $c) { seq kind } }`,
		Variables: map[string]any{"c": room.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if m.Type == "next" {
			var r gqlclient.Response
			if err := jsonUnmarshal(m.Payload, &r); err != nil {
				t.Fatal(err)
			}
			if gqlclient.CodeOf(r.Err()) == code {
				return
			}
			t.Fatalf("subscription message %s: %s, want error %s", m.Type, m.Payload, code)
		}
		if m.Type == "error" && containsCode(m.Payload, code) {
			return
		}
		t.Fatalf("subscription message %s: %s, want error %s", m.Type, m.Payload, code)
	case <-ctx.Done():
		t.Fatalf("no answer to the subscription, want error %s", code)
	}
}

// TestIdentityOnlyFromHeader: an identity in variables, in the
// connection_init payload or in the query string is ignored.
func TestIdentityOnlyFromHeader(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	tok, err := server.MintDev(h.Signer, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// In variables, with no header.
	anon := h.ClientWithToken("")
	if err := anon.Do(ctx, `{ me { email } }`, map[string]any{"X-Turngate-Identity": tok, "identity": tok}, nil); gqlclient.CodeOf(err) != "UNAUTHENTICATED" {
		t.Fatalf("identity in variables: err = %v, want UNAUTHENTICATED", err)
	}
	// In the query string.
	qs := &gqlclient.Client{URL: h.Base + "/graphql?X-Turngate-Identity=" + tok + "&identity=" + tok}
	if err := qs.Do(ctx, `{ me { email } }`, nil, nil); gqlclient.CodeOf(err) != "UNAUTHENTICATED" {
		t.Fatalf("identity in the query string: err = %v, want UNAUTHENTICATED", err)
	}
	// In connection_init, with no header on the upgrade.
	assertSubscriptionCode(t, h, http.Header{}, map[string]any{"X-Turngate-Identity": tok, "headers": map[string]string{"X-Turngate-Identity": tok}}, "UNAUTHENTICATED")

	// A valid header wins over anything in connection_init: bob's envelope
	// in the payload does not make alice's connection bob's. Bob's private
	// room stays invisible to her.
	bobTok, err := server.MintDev(h.Signer, bob, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bobRoom := servertest.Rooms(t, h.Client(t, bob))["Bob's notes"]
	hdr := http.Header{}
	hdr.Set(h.Config.IdentityHeader, tok)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := gqlclient.Dial(cctx, h.Base+"/graphql", hdr, map[string]any{"X-Turngate-Identity": bobTok})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs, err := conn.Subscribe(cctx, "1", gqlclient.Request{
		Query: `subscription($c: ID!) { journal(conversationId: $c) { seq } }`, Variables: map[string]any{"c": bobRoom.ID}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if !(m.Type == "error" && containsCode(m.Payload, "NOT_FOUND")) && !(m.Type == "next" && containsCode(m.Payload, "NOT_FOUND")) {
			t.Fatalf("alice subscribing to bob's room with bob's token in connection_init: %s %s, want NOT_FOUND", m.Type, m.Payload)
		}
	case <-cctx.Done():
		t.Fatal("no answer")
	}
}

// TestExpiredEnvelopeEndsStreams: a stream lives no longer than the
// envelope it was opened under. With an envelope that expires (its exp
// plus the verifier's 30 s leeway) two seconds after it was accepted, the
// WebSocket is closed with 4401 and an SSE subscription ends with
// UNAUTHENTICATED, both while the room is quiet.
func TestExpiredEnvelopeEndsStreams(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	tok, err := h.Signer.MintClaims(map[string]any{
		"sub": authority.DevSubject(alice), "email": alice, "email_verified": true,
		"iss": h.Config.EnvelopeIssuer, "aud": h.Config.EnvelopeAud,
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(2*time.Second - 30*time.Second).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]
	journal := gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}

	hdr := http.Header{}
	hdr.Set(h.Config.IdentityHeader, tok)
	raw := servertest.DialSubscribed(t, ctx, h.Base, hdr, journal)

	sse, err := h.ClientWithToken(tok).SSE(ctx, journal)
	if err != nil {
		t.Fatal(err)
	}
	raw.ExpectClose(ctx, 4401, "Unauthorized: identity envelope expired")
	var last gqlclient.Response
	for r := range sse {
		last = r
	}
	if code := gqlclient.CodeOf(last.Err()); code != "UNAUTHENTICATED" {
		t.Fatalf("SSE ended with %+v, want UNAUTHENTICATED", last)
	}
}
