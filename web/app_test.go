package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestAppPage: the chat page at / carries its config (endpoint, header,
// the dev members only when given), a policy that allows only its own
// script and origin, and versioned assets under /app/; nothing else is
// served and only GET and HEAD are allowed.
func TestAppPage(t *testing.T) {
	get := func(h http.Handler, method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	config := func(body string) appPageConfig {
		t.Helper()
		m := regexp.MustCompile(`<script id="config" type="application/json">(.*?)</script>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no config block in %s", body)
		}
		var c appPageConfig
		if err := json.Unmarshal([]byte(m[1]), &c); err != nil {
			t.Fatalf("config %s: %v", m[1], err)
		}
		return c
	}

	plain := App(AppConfig{Header: "X-Turngate-Identity"})
	res := get(plain, http.MethodGet, "/")
	if res.Code != http.StatusOK || !strings.Contains(res.Header().Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /: %d, CSP %q", res.Code, res.Header().Get("Content-Security-Policy"))
	}
	if c := config(res.Body.String()); c.Endpoint != "/graphql" || c.Header != "X-Turngate-Identity" || c.Dev != nil {
		t.Fatalf("production config %+v", c)
	}
	dev := App(AppConfig{Header: "X-H", Dev: []DevMember{{Email: "a@example.com", Name: "A", Token: "</script><script>alert(1)</script>"}}})
	body := get(dev, http.MethodGet, "/").Body.String()
	if strings.Contains(body, "<script>alert(1)") {
		t.Fatalf("a token broke out of the config block: %s", body)
	}
	if c := config(body); c.Dev == nil || len(c.Dev.Members) != 1 || c.Dev.Members[0].Token != "</script><script>alert(1)</script>" {
		t.Fatalf("dev config %+v", c)
	}

	js := regexp.MustCompile(`src="(/app/app\.js\?v=[0-9a-f]+)"`).FindStringSubmatch(body)
	if js == nil {
		t.Fatalf("no versioned script in %s", body)
	}
	res = get(plain, http.MethodGet, js[1])
	if res.Code != http.StatusOK || !strings.HasPrefix(res.Header().Get("Content-Type"), "text/javascript") || !strings.Contains(res.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("GET %s: %d %q %q", js[1], res.Code, res.Header().Get("Content-Type"), res.Header().Get("Cache-Control"))
	}
	if n, _ := io.Copy(io.Discard, res.Body); n < 1000 {
		t.Fatalf("app.js is %d bytes", n)
	}
	for _, p := range []string{"/app/", "/app/../web.go", "/assets/graphiql.js", "/index.html", "/graphql"} {
		if res := get(plain, http.MethodGet, p); res.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.Code)
		}
	}
	if res := get(plain, http.MethodPost, "/"); res.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", res.Code)
	}
}
