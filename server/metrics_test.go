package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// scrape reads url's Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", url, res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// sum is the total of a family's counters, gauges or histogram counts
// whose labels include want.
func sum(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	for _, m := range mfs[name].GetMetric() {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// TestMetricsMoveWithATurn: /metrics is Prometheus text; after one turn
// that searches and answers, the series of acceptance, start, the end by
// outcome, model steps and tokens by route, tool calls by tool and the
// database pool have moved, and no series is labelled with a room, turn
// or member id.
func TestMetricsMoveWithATurn(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	room := servertest.Rooms(t, a)["Team room"].ID
	before := scrape(t, h.Base+"/metrics")
	id := servertest.SubmitAs(t, ctx, a, room, "When is the launch?", "metrics-1")
	if done := servertest.AwaitTurnEnd(t, ctx, a, id); done.State != "COMPLETED" {
		t.Fatalf("turn ended %s", done.State)
	}
	after := scrape(t, h.Base+"/metrics")
	moved := []struct {
		name   string
		labels map[string]string
	}{
		{"turngate_turns_accepted_total", nil},
		{"turngate_accept_seconds", nil},
		{"turngate_turns_started_total", map[string]string{"attempt": "first"}},
		{"turngate_accept_to_start_seconds", nil},
		{"turngate_turns_ended_total", map[string]string{"outcome": "completed"}},
		{"turngate_model_step_seconds", map[string]string{"route": "builtin", "purpose": "step", "outcome": "ok"}},
		{"turngate_model_tokens_total", map[string]string{"route": "builtin", "direction": "out"}},
		{"turngate_tool_calls_total", map[string]string{"tool": "retrieval", "outcome": "ok"}},
	}
	for _, m := range moved {
		if b, a := sum(before, m.name, m.labels), sum(after, m.name, m.labels); a <= b {
			t.Errorf("%s%v did not move: %v then %v", m.name, m.labels, b, a)
		}
	}
	for _, name := range []string{"go_sql_max_open_connections", "go_sql_in_use_connections", "go_sql_idle_connections", "go_sql_wait_count_total", "turngate_lane_queued_turns",
		"turngate_approvals_pending", "turngate_streams_open", "go_goroutines"} {
		if after[name] == nil {
			t.Errorf("no %s series", name)
		}
	}
	for name, mf := range after {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == room || l.GetValue() == id {
					t.Errorf("%s is labelled with an id: %s=%s", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestReadyzAnswersForTheReplica: /healthz says the process lives;
// /readyz is 200 while the database answers at this binary's schema, and
// 503 once an orderly stop has begun (before the server stops
// accepting).
func TestReadyzAnswersForTheReplica(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	get := func(path string) int {
		res, err := http.Get(h.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if c := get("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz: HTTP %d", c)
	}
	if c := get("/readyz"); c != http.StatusOK {
		t.Fatalf("/readyz: HTTP %d, want 200", c)
	}
	server.SetDraining(h.App)
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining: HTTP %d, want 503", c)
	}
	if c := get("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz while draining: HTTP %d, want 200", c)
	}
}

// TestLogsAreJSONOutsideDevMode: outside dev mode each log line is one
// JSON object, at the configured level; dev mode logs text; a level or
// format that is not one is refused at start.
func TestLogsAreJSONOutsideDevMode(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	prod := server.Config{LogLevel: "warn", EnvelopeKeyFile: "platform.pem"}
	log, err := server.NewLogger(prod, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("not at this level")
	log.Warn("lease renewal failed", "room", "r1", "turn", "t1", "attempt", 2)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log output is not one JSON object: %v\n%s", err, buf.String())
	}
	if line["msg"] != "lease renewal failed" || line["level"] != "WARN" || line["turn"] != "t1" || line["attempt"] != float64(2) {
		t.Fatalf("log line = %v", line)
	}
	buf.Reset()
	if log, err = server.NewLogger(server.Config{LogLevel: "info"}, &buf); err != nil {
		t.Fatal(err)
	}
	log.Info("dev")
	if strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("dev mode logs JSON: %s", buf.String())
	}
	for _, bad := range []server.Config{{LogLevel: "loud"}, {LogLevel: "info", LogFormat: "xml"}} {
		if _, err := server.NewLogger(bad, io.Discard); err == nil {
			t.Errorf("NewLogger(%+v) accepted it", bad)
		}
	}
}

// TestEnvelopesFromAnIdentityProviderKeySet: with
// TURNGATE_ENVELOPE_JWKS_URL the server verifies envelopes with the
// provider's published key of their kid (a standard OIDC provider can
// issue them); the dev key no longer counts.
func TestEnvelopesFromAnIdentityProviderKeySet(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","kid":"idp-1","x":%q}]}`,
			base64.RawURLEncoding.EncodeToString(pub))
	}))
	defer jwks.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.EnvelopeJWKSURL, c.EnvelopeIssuer, c.EnvelopeAud = jwks.URL, "https://idp.example", "turngate"
	})
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://idp.example", "aud": "turngate",
		"sub": "idp|ada", "email": "ada@example.com", "email_verified": true, "name": "Ada", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["kid"] = "idp-1"
	signed, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var me struct{ Me struct{ Email string } }
	if err := h.ClientWithToken(signed).Do(ctx, `{ me { email } }`, nil, &me); err != nil || me.Me.Email != "ada@example.com" {
		t.Fatalf("an envelope of the provider's key: %+v, %v", me, err)
	}
	if err := h.Client(t, alice).Do(ctx, `{ me { email } }`, nil, &me); gqlclient.CodeOf(err) != "UNAUTHENTICATED" {
		t.Fatalf("a dev envelope under a key set: %v, want UNAUTHENTICATED", err)
	}
	// Outside dev mode an envelope lives a day at most, and one checked
	// against a key set must name its key; each refusal says which check
	// failed.
	for _, tt := range []struct {
		name, kid, reason string
		ttl               time.Duration
	}{
		{"two days", "idp-1", authority.ReasonLifetime, 48 * time.Hour},
		{"no kid", "", authority.ReasonNoKeyID, time.Hour},
		{"a kid the provider never published", "idp-2", authority.ReasonUnknownKey, time.Hour},
	} {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://idp.example", "aud": "turngate",
			"sub": "idp|ada", "email": "ada@example.com", "email_verified": true, "iat": now.Unix(), "exp": now.Add(tt.ttl).Unix()})
		if tt.kid != "" {
			tok.Header["kid"] = tt.kid
		}
		signed, err := tok.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		err = h.ClientWithToken(signed).Do(ctx, `{ me { email } }`, nil, &me)
		if gqlclient.CodeOf(err) != "UNAUTHENTICATED" || !strings.Contains(err.Error(), tt.reason) {
			t.Fatalf("%s: %v, want UNAUTHENTICATED saying %q", tt.name, err, tt.reason)
		}
	}
}

// TestOperatorsAddress: with TURNGATE_METRICS_ADDR (and TURNGATE_PPROF),
// /metrics, the probes and Go's profiles answer there, and the API's
// address serves neither the metrics nor the profiles.
func TestOperatorsAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := ln.Addr().String()
	ln.Close()
	h := servertest.New(t, func(c *server.Config) { c.MetricsAddr, c.Pprof = ops, true })
	get := func(url string) int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err := http.Get(url)
			if err == nil {
				res.Body.Close()
				return res.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", url, err)
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			}
		}
	}
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/debug/pprof/"} {
		if c := get("http://" + ops + path); c != http.StatusOK {
			t.Errorf("operators' %s: HTTP %d", path, c)
		}
	}
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		res, err := http.Get(h.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK && (strings.Contains(string(body), "turngate_turns_accepted_total") || strings.Contains(string(body), "goroutine")) {
			t.Errorf("the API's address serves %s", path)
		}
	}
}

// opsGet GETs url on an operators' address that may not be listening
// yet, retrying failed requests until a deadline; it returns the status
// and the body. A request that hangs (a profile of hours) fails.
func opsGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return res.StatusCode, string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// TestProfilesOffUnlessEnabledAndBounded: the operators' address serves
// Go's profiles only with TURNGATE_PPROF; then a profile, trace or delta
// profile of more than MaxProfileDuration is refused with 400 before it
// starts, and the operators' server times out reads and writes (a
// client can hold it no longer than the longest profile).
// TURNGATE_PPROF without an operators' address is refused: the profiles
// never go on the API's address.
func TestProfilesOffUnlessEnabledAndBounded(t *testing.T) {
	t.Parallel()
	freeOps := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	off := freeOps()
	servertest.New(t, func(c *server.Config) { c.MetricsAddr = off })
	if code, _ := opsGet(t, "http://"+off+"/metrics"); code != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/heap"} {
		if code, body := opsGet(t, "http://"+off+path); code != http.StatusNotFound {
			t.Errorf("without TURNGATE_PPROF, %s: HTTP %d %.80q", path, code, body)
		}
	}

	on := freeOps()
	h := servertest.New(t, func(c *server.Config) { c.MetricsAddr, c.Pprof = on, true })
	if code, _ := opsGet(t, "http://"+on+"/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("with TURNGATE_PPROF, /debug/pprof/: HTTP %d", code)
	}
	over := fmt.Sprint(int(server.MaxProfileDuration/time.Second) + 1)
	for _, path := range []string{
		"/debug/pprof/profile?seconds=100000", "/debug/pprof/profile?seconds=" + over,
		"/debug/pprof/trace?seconds=100000", "/debug/pprof/trace?seconds=" + over,
		"/debug/pprof/heap?seconds=100000", "/debug/pprof/allocs?seconds=" + over,
		"/debug/pprof/profile?seconds=-1", "/debug/pprof/profile?seconds=1e9", "/debug/pprof/profile?seconds=ten",
	} {
		if code, body := opsGet(t, "http://"+on+path); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %.80q, want 400", path, code, body)
		}
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/goroutine?debug=1"} {
		if code, body := opsGet(t, "http://"+on+path); code != http.StatusOK {
			t.Errorf("%s: HTTP %d %.80q", path, code, body)
		}
	}
	srv := server.OpsServerOf(h.App)
	if srv.ReadTimeout <= 0 || srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("the operators' server reads without a timeout: %+v", srv)
	}
	if srv.WriteTimeout <= server.MaxProfileDuration || srv.WriteTimeout > 2*server.MaxProfileDuration {
		t.Errorf("the operators' write timeout %s does not fit the longest profile (%s)", srv.WriteTimeout, server.MaxProfileDuration)
	}

	err := server.Config{Pprof: true}.Check()
	if err == nil || !strings.Contains(err.Error(), "TURNGATE_METRICS_ADDR") {
		t.Errorf("TURNGATE_PPROF without an operators' address: %v", err)
	}
}

// TestRunLogLinesNameTheTurn: a run's log lines (here, the run failing on
// an endpoint that refuses every request) carry its room, turn, attempt,
// and, with tracing on, the turn's trace and the run's span.
func TestRunLogLinesNameTheTurn(t *testing.T) {
	t.Parallel()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"no such model"}}`, http.StatusBadRequest)
	}))
	defer refuse.Close()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	logs := &servertest.SyncBuffer{}
	cfg := servertest.Config(filepath.Join(t.TempDir(), "data"), dbtest.NewDB(t), "logs")
	cfg.TracerProvider = tp
	cfg.OpenAI = gateway.OpenAIConfig{BaseURL: refuse.URL, APIKey: "k", Model: "m", MaxRetries: -1}
	cfg.AgentRoute = "openai"
	h := servertest.StartLog(t, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	id := servertest.SubmitAs(t, ctx, a, servertest.Rooms(t, a)["Team room"].ID, "When is the launch?", "logs-1")
	if done := servertest.AwaitTurnEnd(t, ctx, a, id); done.State != "FAILED" {
		t.Fatalf("turn ended %s, want FAILED", done.State)
	}
	var traceID string
	for _, s := range spans.GetSpans() {
		for _, kv := range s.Attributes {
			if string(kv.Key) == "turngate.turn" && kv.Value.AsString() == id {
				traceID = s.SpanContext.TraceID().String()
			}
		}
	}
	if traceID == "" {
		t.Fatal("no span names the turn")
	}
	found := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["turn"] != id {
			continue
		}
		found++
		if rec["room"] == nil || rec["attempt"] == nil || rec["trace"] != traceID || rec["span"] == nil {
			t.Errorf("a line about the turn lacks its room, attempt, trace (%s) or span: %s", traceID, line)
		}
	}
	if found == 0 {
		t.Fatalf("no log line names the failed turn:\n%s", logs.String())
	}
}
