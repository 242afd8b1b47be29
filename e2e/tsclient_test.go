package e2e

import (
	"context"
	"encoding/json"
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
// npm ci and npm run build rewrite its node_modules or dist, npm pack
// reads them, and the tests that do so run in parallel.
var clientsTS sync.Mutex

// npmInstall runs `npm ci` in dir when its node_modules is missing; it
// reports errors rather than failing a test, as it runs inside a
// sync.Once shared by tests. Callers that may meet another test in dir
// hold clientsTS.
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
// clients/ts/test) against real turngate processes: each test file gets a
// world of its own (a database, replicas behind one front door, whose
// control endpoint the tests use to drop connections, kill -9 and restart
// replicas and fail over between them). One vitest process runs the files
// at once, each with its world (clients/ts/vitest.config.ts), the tests
// within a file one at a time, as they share their world; each file's
// result is a subtest here.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../clients/ts")
	if err != nil {
		t.Fatal(err)
	}
	npx := nodeTool(t, "npx")
	buildTSClient(t)
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s/test: %v", dir, err)
	}
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	type world struct {
		URL     string `json:"url"`
		Control string `json:"control"`
	}
	worlds := map[string]world{}
	var names []string
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".test.ts")
		w := e2etest.NewWorld(t, bin, "turngate-ts-")
		// Short leases so a killed run is recovered in seconds; a paced
		// model so an answer streams long enough to be interrupted; a
		// small command bucket so a burst of submits meets RATE_LIMITED.
		f := newFrontDoor(t, w, 1, "TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=40ms",
			"TURNGATE_COMMAND_RATE=2", "TURNGATE_COMMAND_BURST=6")
		worlds[name] = world{URL: f.base + "/graphql", Control: f.ctl}
		names = append(names, name)
	}
	raw, err := json.Marshal(worlds)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "vitest.json")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, "vitest", "run", "--reporter=verbose", "--reporter=json", "--outputFile.json="+report)
	cmd.Dir = dir
	cmd.Env = append(e2etest.CleanEnv(), "TURNGATE_WORLDS="+string(raw), "NO_COLOR=1")
	out, runErr := cmd.CombinedOutput()
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	// vitest's JSON report: one result per file, one per test in it.
	var results struct {
		TestResults []struct {
			Name             string `json:"name"`
			Status           string `json:"status"`
			Message          string `json:"message"`
			AssertionResults []struct {
				FullName        string   `json:"fullName"`
				Status          string   `json:"status"`
				FailureMessages []string `json:"failureMessages"`
			} `json:"assertionResults"`
		} `json:"testResults"`
	}
	if b, err := os.ReadFile(report); err != nil {
		t.Fatalf("vitest wrote no report (%v): %v\n%s", runErr, err, out)
	} else if err := json.Unmarshal(b, &results); err != nil {
		t.Fatalf("vitest's report: %v", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			found := false
			for _, r := range results.TestResults {
				if filepath.Base(r.Name) != name+".test.ts" {
					continue
				}
				found = true
				for _, a := range r.AssertionResults {
					if a.Status == "failed" {
						t.Errorf("%s: %s", a.FullName, strings.Join(a.FailureMessages, "\n"))
					}
				}
				if r.Status != "passed" {
					t.Errorf("%s.test.ts %s: %s", name, r.Status, r.Message)
				}
				if len(r.AssertionResults) == 0 {
					t.Errorf("%s.test.ts ran no tests", name)
				}
			}
			if !found {
				t.Errorf("vitest reported nothing for %s.test.ts", name)
			}
		})
	}
	if runErr != nil && !t.Failed() {
		t.Fatalf("vitest: %v\n%s", runErr, out)
	}
	if t.Failed() && !testing.Verbose() {
		t.Logf("vitest printed:\n%s", out)
	}
}
