package authority

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// seen is what the handler behind the middleware found in its context.
type seen struct {
	Identity Identity `json:"identity"`
	OK       bool     `json:"ok"`
	Reason   string   `json:"reason"`  // RequireIdentity's error
	AuthErr  string   `json:"authErr"` // AuthErrorFromContext
}

func report(w http.ResponseWriter, r *http.Request) {
	id, ok := IdentityFromContext(r.Context())
	_, err := RequireIdentity(r.Context())
	s := seen{Identity: id, OK: ok, Reason: reasonOf(err), AuthErr: reasonOf(AuthErrorFromContext(r.Context()))}
	_ = json.NewEncoder(w).Encode(s)
}

// forge is a handler in front of the middleware that plants an identity,
// as a confused upstream might; the middleware must replace it.
func forge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := NewContextWithIdentity(r.Context(), Identity{Subject: "forged", Email: "mallory@example.com"})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	good := mustMint(t, k.signer, with("email", "Alice@Example.COM", "name", "Alice\nLiddell"))
	expired := mustMint(t, k.signer, with("exp", t0.Add(-time.Hour).Unix()))
	alice := Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice Liddell"}

	srv := httptest.NewServer(forge(Middleware(k.verifier, "")(http.HandlerFunc(report))))
	t.Cleanup(srv.Close)
	custom := httptest.NewServer(Middleware(k.verifier, "x-platform-identity")(http.HandlerFunc(report)))
	t.Cleanup(custom.Close)

	tests := []struct {
		name    string
		base    string
		method  string
		query   url.Values
		body    string
		headers [][2]string
		want    seen
	}{
		{name: "no header", base: srv.URL, want: seen{Reason: ReasonMissing}},
		{name: "empty header", base: srv.URL, headers: [][2]string{{DefaultHeader, "  "}}, want: seen{Reason: ReasonMissing}},
		{name: "valid", base: srv.URL, headers: [][2]string{{DefaultHeader, good}}, want: seen{Identity: alice, OK: true}},
		{name: "valid, header name in any case", base: srv.URL, headers: [][2]string{{"x-turngate-identity", good}}, want: seen{Identity: alice, OK: true}},
		{name: "expired", base: srv.URL, headers: [][2]string{{DefaultHeader, expired}}, want: seen{Reason: ReasonExpired, AuthErr: ReasonExpired}},
		{name: "garbage", base: srv.URL, headers: [][2]string{{DefaultHeader, "nope"}}, want: seen{Reason: ReasonMalformed, AuthErr: ReasonMalformed}},
		{name: "two envelopes", base: srv.URL, headers: [][2]string{{DefaultHeader, good}, {DefaultHeader, good}},
			want: seen{Reason: ReasonAmbiguous, AuthErr: ReasonAmbiguous}},
		{name: "in the query string only", base: srv.URL,
			query: url.Values{DefaultHeader: {good}, "identity": {good}, "token": {good}}, want: seen{Reason: ReasonMissing}},
		{name: "in a GraphQL body only", base: srv.URL, method: http.MethodPost,
			body: `{"query":"{ me { email } }","variables":{"` + DefaultHeader + `":"` + good + `","identity":"` + good + `"},"extensions":{"headers":{"` + DefaultHeader + `":"` + good + `"}}}`,
			want: seen{Reason: ReasonMissing}},
		{name: "in a form body only", base: srv.URL, method: http.MethodPost, body: url.Values{DefaultHeader: {good}}.Encode(),
			headers: [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}, want: seen{Reason: ReasonMissing}},
		{name: "query string does not override the header", base: srv.URL, query: url.Values{DefaultHeader: {expired}},
			headers: [][2]string{{DefaultHeader, good}}, want: seen{Identity: alice, OK: true}},
		{name: "custom header", base: custom.URL, headers: [][2]string{{"X-Platform-Identity", good}}, want: seen{Identity: alice, OK: true}},
		{name: "default header ignored under a custom one", base: custom.URL, headers: [][2]string{{DefaultHeader, good}}, want: seen{Reason: ReasonMissing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			u := tt.base + "/graphql"
			if tt.query != nil {
				u += "?" + tt.query.Encode()
			}
			req, err := http.NewRequestWithContext(context.Background(), method, u, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" && req.Header.Get("Content-Type") == "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for _, h := range tt.headers {
				req.Header.Add(h[0], h[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got seen
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("handler saw %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMiddlewareUpgrade: a WebSocket upgrade is an ordinary request to the
// middleware: the envelope on the upgrade is what the connection gets.
func TestMiddlewareUpgrade(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	good := mustMint(t, k.signer, goodClaims())
	tests := []struct {
		name   string
		header string
		want   seen
	}{
		{"with envelope", good, seen{Identity: Identity{Subject: "user-1", Email: "alice@example.com", DisplayName: "Alice"}, OK: true}},
		{"without", "", seen{Reason: ReasonMissing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/graphql", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Protocol", "graphql-transport-ws")
			if tt.header != "" {
				req.Header.Set(DefaultHeader, tt.header)
			}
			Middleware(k.verifier, DefaultHeader)(http.HandlerFunc(report)).ServeHTTP(rec, req)
			var got seen
			if err := json.NewDecoder(rec.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("handler saw %+v, want %+v", got, tt.want)
			}
		})
	}
}
