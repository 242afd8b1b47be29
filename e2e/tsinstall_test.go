package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/internal/e2etest"
)

// TestTypeScriptClientInstalled meets the TypeScript client the way a web
// developer does: `npm pack` in clients/ts, the tarball installed into a
// fresh project outside the repository (its dependencies from the
// registry, nothing from the clone's node_modules), a small program
// (testdata/tsinstall) type-checked against the installed declarations,
// compiled, and run with node against a real server: it submits a
// question and prints the streamed answer.
func TestTypeScriptClientInstalled(t *testing.T) {
	t.Parallel()
	pkgDir, err := filepath.Abs("../clients/ts")
	if err != nil {
		t.Fatal(err)
	}
	program, err := filepath.Abs("testdata/tsinstall")
	if err != nil {
		t.Fatal(err)
	}
	npm, npx, node := nodeTool(t, "npm"), nodeTool(t, "npx"), nodeTool(t, "node")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(e2etest.CleanEnv(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s in %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), dir, err, out, stderr.Bytes())
		}
		return out
	}

	// Pack as a maintainer would from a clone: the packages the build
	// needs installed, the package built (npm run build, which is what
	// its prepare script runs: buildTSClient, once for every test of the
	// package), then npm pack, without running prepare a second time.
	buildTSClient(t)
	packed := t.TempDir()
	var files []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	clientsTS.Lock()
	out := run(pkgDir, nil, npm, "pack", "--ignore-scripts", "--json", "--pack-destination", packed)
	clientsTS.Unlock()
	if err := json.Unmarshal(out, &files); err != nil || len(files) != 1 {
		t.Fatalf("npm pack --json: %v (%d packages)", err, len(files))
	}
	var paths []string
	for _, f := range files[0].Files {
		paths = append(paths, f.Path)
	}
	t.Logf("the tarball holds %s", strings.Join(paths, " "))

	// The versions of the compiler and Node's types the client is built
	// with, as its package.json pins them.
	var manifest struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	ts, nodeTypes := manifest.DevDependencies["typescript"], manifest.DevDependencies["@types/node"]
	if ts == "" || nodeTypes == "" {
		t.Fatalf("clients/ts/package.json has no typescript or @types/node among its devDependencies")
	}

	// A fresh project outside the repository.
	app, err := os.MkdirTemp("", "turngate-tsapp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(app) })
	if err := os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"tsapp","private":true,"type":"module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(program, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(app, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(app, nil, npm, "install", "--no-audit", "--no-fund", filepath.Join(packed, files[0].Filename),
		"typescript@"+ts, "@types/node@"+nodeTypes)
	for _, dep := range []string{"@turngate/client", "graphql", "graphql-ws", "graphql-sse", "@graphql-typed-document-node/core"} {
		if _, err := os.Stat(filepath.Join(app, "node_modules", dep, "package.json")); err != nil {
			t.Errorf("the installed client lacks %s: %v", dep, err)
		}
	}
	// tsc type-checks as it compiles: a type error fails it (exit 2).
	run(app, nil, npx, "--no-install", "tsc")

	// Run it against a real server.
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	w := e2etest.NewWorld(t, bin, "turngate-tsapp-")
	r := w.Start(t, "tsapp")
	tok, err := e2etest.TokenFor(bin, w.DataDir, alice)
	if err != nil {
		t.Fatal(err)
	}
	out = run(app, []string{"TURNGATE_URL=" + r.Base + "/graphql", "TURNGATE_IDENTITY=" + tok}, node, "dist/main.js")

	// It printed the answer the journal holds, how the turn ended and its
	// sources.
	c := client.New(client.Config{URL: r.Base + "/graphql", Identity: client.Static(tok)})
	rooms, err := c.Conversations(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var answer string
	for _, room := range rooms {
		if room.Title != "Installed from a tarball" {
			continue
		}
		entries, err := c.Journal(ctx, room.Id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Kind == client.JournalKindTurnAnswer {
				answer = e.Answer.Text
			}
		}
	}
	if answer == "" {
		t.Fatalf("no answer in the program's room; it printed:\n%s", out)
	}
	if want := answer + "\n-- COMPLETED (COMPLETED); sources: Launch plan\n"; string(out) != want {
		t.Fatalf("the program printed\n%q\nwant\n%q", out, want)
	}
}
