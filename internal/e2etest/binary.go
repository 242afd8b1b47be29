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

// EnvBinary names a turngate binary the tier runs instead of building one
// (make test builds it once for every package of the tier).
const EnvBinary = "TURNGATE_E2E_BINARY"

var (
	buildOnce sync.Once
	built     string // the binary, once built or named
	buildDir  string // where it was built; removed by Main
	buildErr  error
)

// Binary is the turngate binary the tier runs: the one EnvBinary names,
// or one built from ./cmd/turngate on first use, once per test binary,
// with -race when the tests themselves run under -race.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv(EnvBinary); p != "" {
			built = p
			return
		}
		dir, err := os.MkdirTemp("", "turngate-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		args := []string{"build", "-o", filepath.Join(dir, "turngate")}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/turngate/turngate/cmd/turngate")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built = filepath.Join(dir, "turngate")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// Main runs a package's end-to-end tests: databases cloned from a
// migrated template (dbtest), and the binary built for them removed at
// the end. Use it as TestMain's os.Exit argument.
func Main(m *testing.M) int {
	code := dbtest.Main(m, migrations.Apply)
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	return code
}
