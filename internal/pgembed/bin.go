package pgembed

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// findBinDir returns the folder holding initdb and postgres (see the package
// documentation for the search order). pgdata is only used to prefer the
// major version that created an existing cluster.
func findBinDir(pgdata string) (string, error) {
	if d := os.Getenv("TURNGATE_PG_BIN"); d != "" {
		if hasBinaries(d) {
			return d, nil
		}
		return "", ErrNoBinaries
	}
	var candidates []string
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { // highest version first
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	if v, err := os.ReadFile(filepath.Join(pgdata, "PG_VERSION")); err == nil {
		candidates = append(candidates, filepath.Join("/usr/lib/postgresql", strings.TrimSpace(string(v)), "bin"))
	}
	candidates = append(candidates, debian...)
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if hasBinaries(d) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions compares dotted version numbers such as "9.6" and "15".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}
