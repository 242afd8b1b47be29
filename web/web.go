package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// Config is what the page is told at load time.
type Config struct {
	Endpoint string            // GraphQL path, e.g. "/graphql"
	Headers  map[string]string // pre-filled request headers (dev mode: the demo identity envelope); may be nil
	Title    string
	// DefaultQuery fills the editor of a first visit; empty keeps
	// GraphiQL's own welcome text.
	DefaultQuery string
}

// dist holds the bundle built by web/graphiql (see the package comment).
//
//go:embed dist
var dist embed.FS

// assetsPrefix is where the embedded bundle is served. The index refers to it
// with relative URLs, so the handler also works behind http.StripPrefix.
const assetsPrefix = "/assets/"

// asset is one embedded file, prepared once for serving.
type asset struct {
	data        []byte
	contentType string
	etag        string
}

// bundle is the embedded dist directory, loaded and hashed once per process
// (not at package init, so merely importing web costs nothing).
type bundle struct {
	assets map[string]asset // keyed by file name within dist
	// version identifies the whole bundle. The index appends it to asset URLs
	// as ?v=, which is what makes it safe to let browsers cache assets
	// "forever" under their stable, unhashed names: a rebuilt bundle has a new
	// version and therefore new URLs.
	version string
}

var loadBundle = sync.OnceValues(func() (*bundle, error) {
	return loadEmbedded(dist, "dist", "cd web/graphiql && npm ci && npm run build", "graphiql.js", "graphiql.css")
})

// loadEmbedded loads and hashes the files under root of fsys, and checks
// that the required ones are there (rebuild says how to make them).
func loadEmbedded(fsys embed.FS, root, rebuild string, required ...string) (*bundle, error) {
	b := &bundle{assets: map[string]asset{}}
	all := sha256.New()
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, root+"/")
		sum := sha256.Sum256(data)
		fmt.Fprintf(all, "%s\x00%x\x00", name, sum)
		b.assets[name] = asset{
			data:        data,
			contentType: contentType(name),
			etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, name := range required {
		if _, ok := b.assets[name]; !ok {
			return nil, fmt.Errorf("web: embedded bundle lacks %s; rebuild it with `%s`", name, rebuild)
		}
	}
	b.version = hex.EncodeToString(all.Sum(nil)[:8])
	return b, nil
}

// contentTypes pins the types of the files the bundle contains, so they do not
// depend on the host's MIME database (mime.TypeByExtension reads
// /etc/mime.types and friends). JavaScript must be served with a JavaScript
// type: browsers refuse module scripts and workers otherwise.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ttf":   "font/ttf",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".wasm":  "application/wasm",
}

func contentType(name string) string {
	ext := path.Ext(name)
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// indexTemplate is the page shell. The config travels in a JSON data block
// that main.jsx parses: html/template treats <script type="application/json">
// as a JS context and inserts the value as JSON with <, >, & and quotes
// escaped, so header values (which may hold arbitrary text, e.g. a demo
// identity envelope) cannot terminate the element or inject markup or script.
var indexTemplate = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/graphiql.css?v={{.Version}}">
<style>html,body,#graphiql{height:100%;margin:0}</style>
<script id="config" type="application/json">{{.Config}}</script>
<script type="module" src="assets/graphiql.js?v={{.Version}}"></script>
</head>
<body>
<div id="graphiql"><noscript>The GraphQL explorer needs JavaScript.</noscript></div>
</body>
</html>
`))

// pageConfig is the JSON shape main.jsx reads.
type pageConfig struct {
	Endpoint     string            `json:"endpoint"`
	Headers      map[string]string `json:"headers"`
	Title        string            `json:"title"`
	DefaultQuery string            `json:"defaultQuery,omitempty"`
}

// Handler serves the explorer page at its root path and the embedded assets under /assets/.
//
// It is meant to be mounted at "/" next to more specific routes such as
// "/graphql", so it answers only "/" and "/assets/<file>"; every other path is
// 404 (rather than falling back to the page) so mistyped API paths fail
// loudly. Only GET and HEAD are allowed. The page is rendered once, here,
// because the config is fixed for the handler's lifetime.
//
// Handler panics if the embedded bundle lacks graphiql.js or graphiql.css,
// which can only happen if dist/ was built incompletely or edited by hand (an
// absent dist/ already fails the build at the go:embed directive).
func Handler(cfg Config) http.Handler {
	b, err := loadBundle()
	if err != nil {
		panic(err)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "/graphql"
	}
	if cfg.Title == "" {
		cfg.Title = "GraphiQL"
	}
	headers := cfg.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	var page bytes.Buffer
	err = indexTemplate.Execute(&page, struct {
		Title   string
		Version string
		Config  pageConfig
	}{cfg.Title, b.version, pageConfig{cfg.Endpoint, headers, cfg.Title, cfg.DefaultQuery}})
	if err != nil {
		panic(fmt.Sprintf("web: rendering index: %v", err))
	}
	return &handler{bundle: b, prefix: assetsPrefix, index: page.Bytes(), csp: contentSecurityPolicy(cfg.Endpoint)}
}

// contentSecurityPolicy confines the page to its own origin: scripts and
// workers only from the embedded bundle (no inline script, no eval), network
// access only to this server and, if the endpoint is an absolute URL, its
// origin. Inline styles stay allowed because Monaco injects <style> elements;
// data: fonts and images because the bundled CSS inlines its fonts.
func contentSecurityPolicy(endpoint string) string {
	connect := "'self'"
	if u, err := url.Parse(endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"worker-src 'self'",
		"style-src 'self' 'unsafe-inline'",
		"font-src 'self' data:",
		"img-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'self'",
	}, "; ")
}

// handler serves a page at "/" and its bundle's files under prefix.
type handler struct {
	bundle *bundle
	prefix string
	index  []byte
	csp    string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var a asset
	var isIndex bool
	switch p := r.URL.Path; {
	case p == "/":
		isIndex = true
	case strings.HasPrefix(p, h.prefix):
		var ok bool
		// Exact lookup in the table of embedded files: no directory listings,
		// and nothing like "..", "//" or "%2F" can reach outside it.
		a, ok = h.bundle.assets[strings.TrimPrefix(p, h.prefix)]
		if !ok {
			http.NotFound(w, r)
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}

	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	if isIndex {
		// The page carries the config and the current asset version, so it
		// must always be revalidated.
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Cache-Control", "no-cache")
		hdr.Set("Content-Security-Policy", h.csp)
		hdr.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(h.index))
		return
	}
	serveAsset(w, r, h.bundle, a)
}

// serveAsset writes an embedded file. A URL versioned with the bundle's
// version (as the pages write them) is cached for good; any other
// revalidates by ETag.
func serveAsset(w http.ResponseWriter, r *http.Request, b *bundle, a asset) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", a.etag)
	if r.URL.Query().Get("v") == b.version {
		// Versioned URL (as written by the index): the content behind it can
		// never change, so let the browser keep it.
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// Unversioned or stale URL: usable, but revalidate via the ETag.
		hdr.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
}
