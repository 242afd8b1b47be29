package layering

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryNoRaceTestRuns: a test file built only without -race runs in
// make test's plain pass only if the Makefile's NORACE_PKGS names its
// package; otherwise nothing would ever run it (the race pass excludes
// it by its build tag).
func TestEveryNoRaceTestRuns(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NORACE_PKGS\s*:=(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no NORACE_PKGS line")
	}
	listed := strings.Fields(string(m[1]))
	var tagged []string
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "ent") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(src), "//go:build !race\n") {
			rel, _ := filepath.Rel("../..", filepath.Dir(path))
			tagged = append(tagged, "./"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tagged) == 0 {
		t.Fatal("found no !race test files; the walk is wrong (graph/extension has one)")
	}
	for _, pkg := range tagged {
		if !slices.Contains(listed, pkg) {
			t.Errorf("%s has a test file built only without -race, but the Makefile's NORACE_PKGS (%v) does not name it: nothing runs that test", pkg, listed)
		}
	}
}
