package layering_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTheREADMEMapsEveryPackage keeps the README's "What is where" the
// picture of the layout: every top-level directory that holds a package
// has its row (`dir/`, or a row naming a package under it), and every
// package under internal/ and clients/ is named in the section.
func TestTheREADMEMapsEveryPackage(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "\n## What is where\n")
	if !ok {
		t.Fatal(`the README has no "## What is where" section`)
	}
	text, _, _ := strings.Cut(after, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	if len(named) == 0 {
		t.Fatal("the README's What is where names nothing")
	}

	g := loadGraph(t)
	for _, path := range g.ours() {
		rel := short(path)
		if path == module {
			continue
		}
		top, rest, _ := strings.Cut(rel, "/")
		switch {
		case top == "internal" || top == "clients":
			sub, _, _ := strings.Cut(rest, "/")
			if !named[top+"/"+sub] && !named[sub] {
				t.Errorf("the README's What is where does not name %s/%s", top, sub)
			}
		case !named[top] && !namesUnder(named, top):
			t.Errorf("the README's What is where has no row for %s/ (package %s)", top, rel)
		}
	}
}

// namesUnder reports whether a name in the section lies under dir.
func namesUnder(named map[string]bool, dir string) bool {
	for n := range named {
		if strings.HasPrefix(n, dir+"/") {
			return true
		}
	}
	return false
}
