package web

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// hostile is a header value that would break out of the config <script>
// element if it were inserted without escaping.
const hostile = `</script><script>alert("x")</script>&<!--`

func testConfig() Config {
	return Config{
		Endpoint: "/graphql",
		Headers:  map[string]string{"X-Turngate-Identity": hostile},
		Title:    "Turngate <explorer>",
	}
}

func get(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

var configBlock = regexp.MustCompile(`(?s)<script id="config" type="application/json">(.*?)</script>`)

func TestIndex(t *testing.T) {
	t.Parallel()
	h := Handler(testConfig())
	res, body := get(t, h, http.MethodGet, "/")

	if res.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type = %q, want text/html", ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control = %q, want no-cache", cc)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want script-src 'self'", csp)
	}
	if !strings.Contains(body, "<title>Turngate &lt;explorer&gt;</title>") {
		t.Errorf("title not escaped in:\n%s", body)
	}

	// The hostile value must appear only in escaped form: exactly one script
	// end tag per script element, and no raw injected markup.
	if n := strings.Count(body, "</script>"); n != 2 {
		t.Errorf("found %d </script> tags, want 2 (config + module):\n%s", n, body)
	}
	if strings.Contains(body, `<script>alert`) || strings.Contains(body, "<!--") {
		t.Errorf("header value not escaped:\n%s", body)
	}

	m := configBlock.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no config block in:\n%s", body)
	}
	// The block is raw text for the browser (no HTML entity decoding), so it
	// must be valid JSON as-is and round-trip to the original value.
	var cfg struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
		Title    string            `json:"title"`
	}
	if err := json.Unmarshal([]byte(m[1]), &cfg); err != nil {
		t.Fatalf("config block is not JSON: %v\n%s", err, m[1])
	}
	if got := cfg.Headers["X-Turngate-Identity"]; got != hostile {
		t.Errorf("header round-trip = %q, want %q", got, hostile)
	}
	if cfg.Endpoint != "/graphql" || cfg.Title != "Turngate <explorer>" {
		t.Errorf("config = %+v", cfg)
	}
	if !strings.Contains(m[1], `\u003c/script\u003e`) {
		t.Errorf("expected </script> to be escaped as \\u003c/script\\u003e in %s", m[1])
	}
}

func TestIndexDefaults(t *testing.T) {
	t.Parallel()
	_, body := get(t, Handler(Config{}), http.MethodGet, "/")
	m := configBlock.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no config block in:\n%s", body)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(m[1]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["endpoint"] != "/graphql" {
		t.Errorf("endpoint = %v, want /graphql", cfg["endpoint"])
	}
	if h, ok := cfg["headers"].(map[string]any); !ok || len(h) != 0 {
		t.Errorf("headers = %#v, want {}", cfg["headers"])
	}
}

var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

func TestReferencedAssets(t *testing.T) {
	t.Parallel()
	h := Handler(testConfig())
	_, body := get(t, h, http.MethodGet, "/")

	base, _ := url.Parse("http://example.test/")
	want := map[string]string{
		"/assets/graphiql.js":  "text/javascript",
		"/assets/graphiql.css": "text/css",
	}
	seen := map[string]bool{}
	for _, m := range assetRef.FindAllStringSubmatch(body, -1) {
		ref, err := base.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatalf("bad reference %q: %v", m[1], err)
		}
		if ref.Scheme == "data" {
			continue // inline (the empty favicon), nothing to fetch
		}
		wantType, ok := want[ref.Path]
		if !ok {
			t.Errorf("unexpected reference %q", m[1])
			continue
		}
		seen[ref.Path] = true
		t.Run(ref.Path, func(t *testing.T) {
			t.Parallel()
			res, body := get(t, h, http.MethodGet, ref.RequestURI())
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, wantType) {
				t.Errorf("Content-Type = %q, want %s", ct, wantType)
			}
			if len(body) == 0 {
				t.Error("empty body")
			}
			if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
				t.Errorf("versioned asset Cache-Control = %q, want immutable", cc)
			}
		})
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("index does not reference %s", p)
		}
	}
}

// The Monaco workers are not referenced by the page but loaded by graphiql.js
// (relative to its own URL), so they must be served too.
func TestWorkers(t *testing.T) {
	t.Parallel()
	h := Handler(Config{})
	for _, name := range []string{"editor.worker.js", "json.worker.js", "graphql.worker.js"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, body := get(t, h, http.MethodGet, "/assets/"+name)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("Content-Type = %q", ct)
			}
			if len(body) == 0 {
				t.Error("empty body")
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("unversioned asset Cache-Control = %q, want no-cache", cc)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	h := Handler(Config{})
	for _, p := range []string{
		"/nope",
		"/index.html",
		"/graphql",
		"/assets/",
		"/assets/nope.js",
		"/assets/../web.go",
		"/assets/%2e%2e/web.go",
		"/assets//graphiql.js",
		"/dist/graphiql.js",
	} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			if res, _ := get(t, h, http.MethodGet, p); res.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
			}
		})
	}
}

func TestMethods(t *testing.T) {
	t.Parallel()
	h := Handler(Config{})
	for _, p := range []string{"/", "/assets/graphiql.js"} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			res, _ := get(t, h, http.MethodPost, p)
			if res.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST %s = %d, want 405", p, res.StatusCode)
			}
			if allow := res.Header.Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("Allow = %q", allow)
			}

			res, body := get(t, h, http.MethodHead, p)
			if res.StatusCode != http.StatusOK || body != "" {
				t.Errorf("HEAD %s = %d with %d body bytes, want 200 and none", p, res.StatusCode, len(body))
			}
		})
	}
}

func TestAbsoluteEndpointAllowedByCSP(t *testing.T) {
	t.Parallel()
	res, _ := get(t, Handler(Config{Endpoint: "https://api.example.test/graphql"}), http.MethodGet, "/")
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' https://api.example.test") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}
