package layering_test

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the import path every module-relative name below is under.
const module = "github.com/turngate/turngate"

// section is the heading of the doc.go section each rule restates.
const section = "# What it must not import"

// rule is one doc.go's "What it must not import" section as data. Module
// packages are written relative to the module ("lease", "ent/..."); other
// patterns are full import paths ("database/sql", "github.com/lib/pq/...").
// A pattern ending in "/..." matches that path and everything under it; any
// other pattern matches one path exactly.
type rule struct {
	// pkg is the package (or, with "/...", the tree) the rule is about; its
	// doc.go holds the section.
	pkg string
	// never lists what it must not reach at all: through its own imports
	// or any package under them.
	never []string
	// except takes patterns back out of never (a tree's own packages, say).
	except []string
	// neverDirect lists what its own files must not import, though a
	// package it imports may.
	neverDirect []string
	// only, when not nil, is every package of this module its own files may
	// import; an empty list means none.
	only []string
	// onlyOutside, when not nil, is every package outside this module and
	// the standard library its own files may import.
	onlyOutside []string
	// importedBy, when not nil, is every package of this module whose own
	// (non-test) files may import it; an empty list means tests only.
	importedBy []string
}

// network and sql are what the untrusted runtime must never reach: a
// network client or a database driver.
var network = []string{
	"net", "net/http/...", "net/rpc/...", "net/smtp",
	"github.com/coder/websocket/...",
}

var sql = []string{"database/sql/...", "github.com/lib/pq/..."}

// rules restates every "What it must not import" section, in the order of
// the packages' paths. Edit the doc.go and its row together.
var rules = []rule{
	{
		pkg:   "admin",
		never: mod("graph", "turn", "runner", "callback"),
	},
	{
		pkg:   "authority",
		only:  mod("errcode", "pg", "ent/...", "internal/startstop"),
		never: mod("turn", "lease", "runner", "callback", "tools", "room", "graph", "server"),
	},
	{
		pkg: "callback",
		only: mod("lease", "outcome", "journal", "gateway", "guard", "tools", "resource",
			"authority", "runtime", "ent/...", "pg", "metrics", "tracing"),
		never: mod("turn", "runner", "graph", "server"),
	},
	{
		pkg:    "clients/go",
		never:  mod("..."),
		except: mod("clients/..."),
	},
	{
		pkg:    "clients/go/chat",
		never:  mod("..."),
		except: mod("clients/..."),
	},
	{
		pkg:        "cmd/turngate",
		never:      mod("internal/dbtest/...", "internal/testkit", "internal/servertest", "internal/e2etest", "internal/gqlclient", "e2e/..."),
		importedBy: []string{},
	},
	{
		pkg:         "demo",
		only:        mod("authority", "room", "resource", "ent/...", "tools"),
		never:       mod("turn", "runner", "callback", "graph", "server"),
		neverDirect: mod("lease"),
	},
	{
		pkg:        "e2e",
		never:      mod("..."),
		importedBy: []string{},
	},
	{
		pkg:    "ent/...",
		never:  mod("..."),
		except: mod("ent/..."),
	},
	{
		pkg:         "ent/schema",
		never:       mod("..."),
		onlyOutside: []string{"entgo.io/...", "github.com/google/uuid"},
	},
	{
		pkg:         "errcode",
		never:       mod("..."),
		onlyOutside: []string{"github.com/lib/pq/..."},
	},
	{
		pkg:   "feed",
		never: mod("graph", "lease", "gateway", "runtime", "runner", "callback", "tools"),
	},
	{
		pkg:   "gateway",
		never: mod("..."),
	},
	{
		pkg:         "graph",
		never:       mod("runner", "callback", "server"),
		neverDirect: append(mod("pg", "lease"), sql...),
		importedBy:  mod("server"),
	},
	{
		pkg:  "graph/extension",
		only: mod("authority", "errcode"),
		never: mod("graph", "admin", "callback", "demo", "feed", "gateway", "guard",
			"journal", "lease", "resource", "room", "runner", "server", "tools", "turn"),
	},
	{
		pkg:    "graph/generated",
		never:  mod("..."),
		except: mod("graph/model"),
	},
	{
		pkg:   "graph/model",
		never: mod("..."),
	},
	{
		pkg:   "guard",
		never: mod("..."),
	},
	{
		pkg:    "internal/dbtest",
		never:  mod("..."),
		except: mod("internal/pgembed", "pg"),
	},
	{
		pkg:   "internal/dbtest/withpostgres",
		only:  mod("internal/dbtest", "internal/pgembed"),
		never: mod("server", "cmd/..."),
	},
	{
		pkg:        "internal/e2etest",
		never:      mod("cmd/..."),
		importedBy: []string{},
	},
	{
		pkg:   "internal/gqlclient",
		never: mod("..."),
	},
	{
		pkg:   "internal/layering",
		never: mod("..."),
	},
	{
		pkg:   "internal/pgembed",
		never: mod("..."),
	},
	{
		pkg:        "internal/servertest",
		never:      mod("cmd/..."),
		importedBy: mod("internal/e2etest"),
	},
	{
		pkg:         "internal/startstop",
		never:       mod("..."),
		onlyOutside: []string{},
	},
	{
		pkg:   "internal/testbin",
		never: mod("..."),
	},
	{
		pkg:        "internal/testkit",
		never:      mod("server"),
		importedBy: []string{},
	},
	{
		pkg:   "journal",
		only:  mod("pg", "internal/startstop"),
		never: mod("lease", "turn", "runner", "callback", "room", "feed", "graph", "server"),
	},
	{
		pkg:   "lease",
		only:  mod("ent/...", "journal", "pg", "outcome", "authority", "metrics"),
		never: mod("turn", "runner", "callback", "graph", "server"),
	},
	{
		pkg:         "metrics",
		never:       mod("..."),
		onlyOutside: []string{"github.com/prometheus/client_golang/..."},
	},
	{
		pkg:   "migrations",
		never: mod("..."),
	},
	{
		pkg:   "outcome",
		never: mod("..."),
	},
	{
		pkg:         "pg",
		never:       mod("..."),
		onlyOutside: []string{"github.com/lib/pq/...", "github.com/google/uuid"},
	},
	{
		pkg:   "resource",
		only:  mod("authority", "pg", "sandbox"),
		never: mod("tools", "turn", "lease", "runner", "callback", "room", "graph", "server"),
	},
	{
		pkg:   "room",
		only:  mod("authority", "journal", "lease", "resource", "ent/...", "errcode", "metrics"),
		never: mod("turn", "runner", "callback", "tools", "graph", "server"),
	},
	{
		pkg: "runner",
		only: mod("lease", "outcome", "callback", "journal", "gateway", "tools", "guard", "runtime",
			"authority", "resource", "ent/...", "metrics", "tracing", "internal/startstop"),
		never: mod("turn", "graph", "server"),
	},
	{
		pkg:    "runtime/...",
		never:  slices.Concat(mod("..."), network, sql),
		except: mod("runtime/..."),
	},
	{
		pkg:         "sandbox",
		never:       mod("..."),
		onlyOutside: []string{"go.starlark.net/..."},
	},
	{
		pkg:        "server",
		never:      mod("cmd/..."),
		importedBy: mod("cmd/turngate", "internal/servertest"),
	},
	{
		pkg:   "tools",
		only:  mod("authority", "pg", "resource", "sandbox"),
		never: mod("turn", "lease", "runner", "callback", "journal", "room", "graph", "server"),
	},
	{
		pkg:         "tracing",
		never:       mod("..."),
		onlyOutside: []string{"go.opentelemetry.io/..."},
	},
	{
		pkg: "turn",
		only: mod("lease", "journal", "authority", "resource", "ent/...", "pg",
			"errcode", "gateway", "metrics", "tracing"),
		never: mod("runner", "callback", "graph", "server"),
	},
	{
		pkg:   "web",
		never: mod("..."),
	},
}

// mod writes module-relative patterns as import-path patterns.
func mod(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = module + "/" + n
	}
	return out
}

// match reports whether an import path matches a pattern ("x/..." matches x
// and what is under it).
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	Imports    []string
}

// graph is the import graph of the whole module and everything it reaches.
type graph map[string]pkg

// loadGraph runs go list once over the module, with every dependency.
func loadGraph(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,Standard,Imports", module+"/...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := graph{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		g[p.ImportPath] = p
	}
	if len(g[module+"/lease"].Imports) == 0 {
		t.Fatalf("go list reported no imports for lease: %d packages", len(g))
	}
	return g
}

// ours lists the module's packages, sorted.
func (g graph) ours() []string {
	var out []string
	for path := range g {
		if match(module+"/...", path) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// chain returns the shortest import chain from one package to a package
// that matches bad (and not skip), or nil when it reaches none: the
// transitive closure go list calls Deps, with the way there kept.
func (g graph) chain(from string, bad func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range g[cur].Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = cur
			if bad(imp) {
				var path []string
				for p := imp; p != ""; p = prev[p] {
					path = append(path, p)
				}
				slices.Reverse(path)
				return path
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

func short(path string) string {
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// TestLayering checks every row of rules against the import graph.
func TestLayering(t *testing.T) {
	t.Parallel()
	g := loadGraph(t)
	ours := g.ours()

	for _, tt := range rules {
		t.Run(tt.pkg, func(t *testing.T) {
			t.Parallel()
			pattern := module + "/" + tt.pkg
			var pkgs []string
			for _, p := range ours {
				if match(pattern, p) {
					pkgs = append(pkgs, p)
				}
			}
			if len(pkgs) == 0 {
				t.Fatalf("no package of the module matches %s", tt.pkg)
			}
			for _, p := range pkgs {
				checkRule(t, g, ours, tt, p)
			}
		})
	}
}

func checkRule(t *testing.T, g graph, ours []string, tt rule, p string) {
	forbidden := func(imp string) bool {
		return matchAny(tt.never, imp) && !matchAny(tt.except, imp) && imp != p
	}
	if c := g.chain(p, forbidden); c != nil {
		via := ""
		if len(c) > 2 {
			via = " (through " + strings.Join(mapShort(c[1:len(c)-1]), " → ") + ")"
		}
		t.Errorf("%s must not import %s, and does%s", short(p), short(c[len(c)-1]), via)
	}
	for _, imp := range g[p].Imports {
		if matchAny(tt.neverDirect, imp) {
			t.Errorf("%s must not import %s itself, and does", short(p), short(imp))
		}
		inModule := match(module+"/...", imp)
		if tt.only != nil && inModule && !matchAny(tt.only, imp) {
			t.Errorf("%s imports %s, which its doc.go does not list (it lists %s)",
				short(p), short(imp), strings.Join(mapShort(tt.only), ", "))
		}
		if tt.onlyOutside != nil && !inModule && !g[imp].Standard && !matchAny(tt.onlyOutside, imp) {
			t.Errorf("%s imports %s, outside the module and the standard library, which its doc.go does not allow",
				short(p), imp)
		}
	}
	if tt.importedBy != nil {
		for _, q := range ours {
			if slices.Contains(g[q].Imports, p) && !matchAny(tt.importedBy, q) {
				t.Errorf("%s is imported by %s; its doc.go allows only %s",
					short(p), short(q), orTests(mapShort(tt.importedBy)))
			}
		}
	}
}

func mapShort(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = short(strings.TrimSuffix(p, "/..."))
	}
	return out
}

func orTests(names []string) string {
	if len(names) == 0 {
		return "tests"
	}
	return strings.Join(names, ", ") + " and tests"
}

// TestEverySectionHasARow fails when a doc.go has a "What it must not
// import" section and the table no row for its package, or the table a
// row whose package's doc.go has no such section: the prose and the rules
// must not drift apart.
func TestEverySectionHasARow(t *testing.T) {
	t.Parallel()
	g := loadGraph(t)

	rows := map[string]bool{}
	for _, r := range rules {
		if rows[r.pkg] {
			t.Errorf("two rows for %s", r.pkg)
		}
		rows[r.pkg] = true
	}

	sections := map[string]bool{}
	for _, p := range g.ours() {
		doc := filepath.Join(g[p].Dir, "doc.go")
		f, err := parser.ParseFile(token.NewFileSet(), doc, nil, parser.PackageClauseOnly|parser.ParseComments)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			t.Fatalf("parse %s: %v", doc, err)
		}
		if f.Doc == nil {
			continue
		}
		for line := range strings.Lines(f.Doc.Text()) {
			if strings.TrimSpace(line) == section {
				sections[short(p)] = true
			}
		}
	}
	if len(sections) == 0 {
		t.Fatal("found no doc.go with a section " + section)
	}

	for name := range sections {
		if !rows[name] && !rows[name+"/..."] {
			t.Errorf("%s/doc.go has a section %q but the table has no row for %s", name, section, name)
		}
	}
	for r := range rows {
		if !sections[strings.TrimSuffix(r, "/...")] {
			t.Errorf("the table has a row for %s but %s/doc.go has no section %q",
				r, strings.TrimSuffix(r, "/..."), section)
		}
	}
}
