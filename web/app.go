package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
)

// DevMember is a demo member the dev-mode app may act as.
type DevMember struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

// AppConfig is what the chat app's page is told at load time.
type AppConfig struct {
	Endpoint string // GraphQL path, e.g. "/graphql"
	Header   string // the identity envelope header
	Title    string
	// Dev, when set, lists the demo members and their envelopes: the page
	// opens as the first and can switch. Only a dev-mode server serving a
	// loopback address sets it. Without it the page asks the host page's
	// window.turngateIdentity hook for the envelope.
	Dev []DevMember
}

// appDist holds the chat app built by web/app (see the package comment).
//
//go:embed app/dist
var appDist embed.FS

// appAssetsPrefix is where the app's assets are served.
const appAssetsPrefix = "/app/"

var loadApp = sync.OnceValues(func() (*bundle, error) {
	return loadEmbedded(appDist, "app/dist", "make web", "app.js", "app.css")
})

var appTemplate = template.Must(template.New("app").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/app/app.css?v={{.Version}}">
<script id="config" type="application/json">{{.Config}}</script>
<script type="module" src="/app/app.js?v={{.Version}}"></script>
</head>
<body>
<div id="root"><noscript>turngate's chat needs JavaScript.</noscript></div>
</body>
</html>
`))

// appPageConfig is the JSON shape web/app/src/main.tsx reads.
type appPageConfig struct {
	Endpoint string `json:"endpoint"`
	Header   string `json:"header"`
	Dev      *struct {
		Members []DevMember `json:"members"`
	} `json:"dev"`
}

// App serves the chat web app: its page at "/" and its assets under
// /app/. Like Handler, it answers only those paths (anything else is 404)
// and only GET and HEAD.
func App(cfg AppConfig) http.Handler {
	b, err := loadApp()
	if err != nil {
		panic(err)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "/graphql"
	}
	if cfg.Title == "" {
		cfg.Title = "turngate"
	}
	pc := appPageConfig{Endpoint: cfg.Endpoint, Header: cfg.Header}
	if len(cfg.Dev) > 0 {
		pc.Dev = &struct {
			Members []DevMember `json:"members"`
		}{cfg.Dev}
	}
	var page bytes.Buffer
	if err := appTemplate.Execute(&page, struct {
		Title, Version string
		Config         appPageConfig
	}{cfg.Title, b.version, pc}); err != nil {
		panic(fmt.Sprintf("web: rendering the app page: %v", err))
	}
	return &handler{bundle: b, prefix: appAssetsPrefix, index: page.Bytes(), csp: appPolicy}
}

// appPolicy confines the app to its own origin: its one script and
// stylesheet, network access only to this server, no inline script, no
// framing by other sites. Answers are sanitized before they are inserted,
// and this is the second line.
var appPolicy = strings.Join([]string{
	"default-src 'none'",
	"script-src 'self'",
	"style-src 'self'",
	"img-src 'self' data: blob:",
	"connect-src 'self'",
	"base-uri 'none'",
	"form-action 'none'",
	"frame-ancestors 'self'",
}, "; ")
