package e2etest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
)

// EnvBinary and EnvPlainBinary name the turngate binaries the tier runs
// instead of building them (make test builds each once for the tier).
const (
	EnvBinary      = "TURNGATE_E2E_BINARY"
	EnvPlainBinary = "TURNGATE_E2E_PLAIN_BINARY"
)

// build is one binary of the tier, built at most once per test binary.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	raced, plain build
	buildDirs    []string // where binaries were built; removed by Main
	buildMu      sync.Mutex
)

// Binary is the turngate binary the tier runs: the one EnvBinary names
// (make test names one built with -race, so the race detector watches the
// server processes), or one built from ./cmd/turngate on first use, once
// per test binary, with -race when the tests themselves run under -race.
func Binary(t testing.TB) string {
	t.Helper()
	return raced.get(t, EnvBinary, raceEnabled)
}

// PlainBinary is a turngate binary built without -race, as the
// Dockerfile builds the image's: static (CGO off) and -trimpath (the one
// EnvPlainBinary names, or built once). It is for the tests that measure
// a process's memory, which the race detector's shadow memory would
// distort, for the test of what the image ships, for benchmarks, and for
// the tests whose subject is a client (the TypeScript and Go clients, the
// AI SDK transport, the web app and the terminal chat): the servers they
// start are only the clients' counterpart, and race-built they cost the
// tier some 75 CPU-seconds a run (measured, 2 cores) for what the
// server's own fault tests (kill -9, SIGSTOP, SIGTERM, chaos, approvals
// across a kill), which run Binary, already race-check.
func PlainBinary(t testing.TB) string {
	t.Helper()
	if !raceEnabled && os.Getenv(EnvBinary) == "" && os.Getenv(EnvPlainBinary) == "" {
		return Binary(t) // built here, the same way
	}
	return plain.get(t, EnvPlainBinary, false)
}

func (b *build) get(t testing.TB, env string, race bool) string {
	t.Helper()
	b.once.Do(func() {
		if p := os.Getenv(env); p != "" {
			b.path = p
			return
		}
		dir, err := os.MkdirTemp("", "turngate-e2e-bin-")
		if err != nil {
			b.err = err
			return
		}
		buildMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildMu.Unlock()
		args := []string{"build", "-o", filepath.Join(dir, "turngate")}
		cmd := exec.Command("go")
		if race {
			args = append(args, "-race")
		} else {
			args = append(args, "-trimpath")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		cmd.Args = append(cmd.Args, append(args, "github.com/turngate/turngate/cmd/turngate")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.path = filepath.Join(dir, "turngate")
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Main runs a package's end-to-end tests: databases cloned from a
// migrated template (dbtest), and the binary built for them removed at
// the end. Use it as TestMain's os.Exit argument.
func Main(m dbtest.Runner) int {
	code := dbtest.Main(m, migrations.Apply)
	for _, dir := range buildDirs {
		os.RemoveAll(dir)
	}
	return code
}
