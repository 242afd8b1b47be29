package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
)

// nodeTool finds a Node.js tool (node, npm, npx) or fails the test: the
// TypeScript client and the web app are part of the suite, and `make
// test` installs what they need (see the Makefile's npm target).
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: the TypeScript tests need Node.js 20 and npm (Debian: apt-get install nodejs npm)", name)
	}
	return p
}

// clientsTS is held while a test installs, builds or packs in clients/ts:
// npm ci, npm run build and npm pack (whose prepare builds) all rewrite
// its node_modules or dist, and the tests that do so run in parallel.
var clientsTS sync.Mutex

// npmInstalled runs `npm ci` in dir when its node_modules is missing.
// Callers that may meet another test in dir hold clientsTS.
func npmInstalled(t *testing.T, dir string) {
	t.Helper()
	if err := npmInstall(nodeTool(t, "npm"), dir); err != nil {
		t.Fatal(err)
	}
}

// npmInstall is npmInstalled for code that reports errors rather than
// failing a test (inside a sync.Once shared by tests).
func npmInstall(npm, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
		return nil
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return nil
}

// tsClientBuild builds the TypeScript client once per package run, for
// its own tests and for the examples that depend on it (at once, two
// builds would write the same dist/).
var tsClientBuild struct {
	once sync.Once
	err  error
}

// npmTypecheckAndBuild installs dir's packages when missing, then runs
// its typecheck and build scripts. Callers hold clientsTS.
func npmTypecheckAndBuild(npm, dir string) error {
	if err := npmInstall(npm, dir); err != nil {
		return err
	}
	for _, script := range []string{"typecheck", "build"} {
		cmd := exec.Command(npm, "run", "--silent", script)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm run %s in %s: %v\n%s", script, dir, err, out)
		}
	}
	return nil
}

// buildTSClient installs the client's packages when missing, type-checks
// it (tests included) and builds it to ESM with its declarations.
func buildTSClient(t *testing.T) {
	t.Helper()
	npm := nodeTool(t, "npm")
	tsClientBuild.once.Do(func() {
		clientsTS.Lock()
		defer clientsTS.Unlock()
		dir, err := filepath.Abs("../clients/ts")
		if err != nil {
			tsClientBuild.err = err
			return
		}
		if tsClientBuild.err = npmTypecheckAndBuild(npm, dir); tsClientBuild.err != nil {
			return
		}
		for _, f := range []string{"index.js", "index.d.ts", "react.js", "react.d.ts", "ai-sdk.js", "ai-sdk.d.ts"} {
			if _, err := os.Stat(filepath.Join(dir, "dist", f)); err != nil {
				tsClientBuild.err = fmt.Errorf("the package build lacks %s: %v", f, err)
				return
			}
		}
	})
	if tsClientBuild.err != nil {
		t.Fatal(tsClientBuild.err)
	}
}

// TestTypeScriptClient runs the TypeScript client's tests (vitest, in
// clients/ts/test) against real turngate processes on one database behind
// one front door, whose control endpoint the tests use to drop
// connections, kill -9 and restart replicas and fail over between them.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../clients/ts")
	if err != nil {
		t.Fatal(err)
	}
	npx := nodeTool(t, "npx")
	buildTSClient(t)
	// Each test file gets a world of its own (a database, replicas, a
	// front door): the files run at once, the tests within a file one at
	// a time, as they share their world.
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s/test: %v", dir, err)
	}
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".test.ts")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := e2etest.NewWorld(t, bin, "turngate-ts-")
			// Short leases so a killed run is recovered in seconds; a
			// paced model so an answer streams long enough to be
			// interrupted; a small command bucket so a burst of submits
			// meets RATE_LIMITED.
			f := newFrontDoor(t, w, 1, "TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=40ms",
				"TURNGATE_COMMAND_RATE=2", "TURNGATE_COMMAND_BURST=6")
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, npx, "vitest", "run", "--reporter=verbose", filepath.Join("test", filepath.Base(file)))
			cmd.Dir = dir
			cmd.Env = append(e2etest.CleanEnv(), "TURNGATE_URL="+f.base+"/graphql", "TURNGATE_CONTROL="+f.ctl, "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("vitest %s: %v\n%s", name, err, out)
			}
			if testing.Verbose() {
				t.Logf("%s", out)
			}
		})
	}
}
