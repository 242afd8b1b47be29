package server_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/server"
)

// TestEverySettingIsInTheREADME: each environment variable the binary
// reads (every TURNGATE_* name in its sources, and DATABASE_URL) has a
// row in the README's Configuration table or, for a bound, its Limits
// table, so those stay the list an operator reads.
func TestEverySettingIsInTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var table string
	for _, section := range []string{"## Limits and errors", "## Configuration"} {
		_, rest, ok := strings.Cut(string(readme), section)
		if !ok {
			t.Fatalf("README has no %q section", section)
		}
		body, _, _ := strings.Cut(rest, "\n## ")
		table += body
	}
	// The server's sources and its command's.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := filepath.Glob("../cmd/turngate/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, cmd...)
	name := regexp.MustCompile(`"(TURNGATE_[A-Z0-9_]+|DATABASE_URL)"`)
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			seen[m[1]] = true
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d settings in the sources: the pattern is wrong", len(seen))
	}
	for env := range seen {
		if !strings.Contains(table, "`"+env+"`") {
			t.Errorf("%s is read by the binary but has no row in the README's Configuration or Limits table", env)
		}
	}
}

// TestTheREADMEListsTheSettings: the variables the README's Configuration
// and Limits tables name are the settings of ConfigFromEnv's table, and
// the few the command reads itself — no row for a setting that is gone,
// no setting without a row.
func TestTheREADMEListsTheSettings(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Read by cmd/turngate, not by the server's configuration.
	byCommand := []string{"TURNGATE_IDENTITY"}

	name := regexp.MustCompile("`(TURNGATE_[A-Z0-9_]+|DATABASE_URL)`")
	inREADME := map[string]bool{}
	for _, section := range []string{"## Limits and errors", "## Configuration"} {
		_, rest, ok := strings.Cut(string(readme), section)
		if !ok {
			t.Fatalf("README has no %q section", section)
		}
		body, _, _ := strings.Cut(rest, "\n## ")
		for _, m := range name.FindAllStringSubmatch(body, -1) {
			inREADME[m[1]] = true
		}
	}
	inTable := map[string]bool{}
	for _, n := range slices.Concat(server.SettingNames(), byCommand) {
		if inTable[n] {
			t.Errorf("%s is in the settings table twice", n)
		}
		inTable[n] = true
	}
	if len(inTable) < 10 {
		t.Fatalf("the settings table has only %d settings", len(inTable))
	}
	for n := range inTable {
		if !inREADME[n] {
			t.Errorf("%s is a setting but the README's Configuration and Limits tables do not name it", n)
		}
	}
	for n := range inREADME {
		if !inTable[n] {
			t.Errorf("the README names %s, which is not in the settings table", n)
		}
	}
}
