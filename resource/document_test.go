package resource_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/resource"
)

// TestPassages: a body is cut into paragraphs; a heading is never a
// passage of its own (a `# title` line would be a cited p0 that says
// nothing) but opens the passage of the paragraph after it; every
// passage is a span of the body as written.
func TestPassages(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 300) // 1,500 bytes: cut in two
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"paragraphs", "One.\n\nTwo.\r\n\r\nThree.\n", []string{"One.", "Two.", "Three."}},
		{"the title opens the first passage", "# Launch plan\n\nThe launch is on Friday.\n\nThe freeze is on Monday.\n",
			[]string{"# Launch plan\n\nThe launch is on Friday.", "The freeze is on Monday."}},
		{"a heading with its text on the next line", "# Title\nThe text.\n", []string{"# Title\nThe text."}},
		{"headings in a row open one passage", "# Handbook\n\n## Hours\n\nThe office opens at nine.\n\n## Leave\n\nAsk first.",
			[]string{"# Handbook\n\n## Hours\n\nThe office opens at nine.", "## Leave\n\nAsk first."}},
		{"a heading alone stays", "# Only a title\n", []string{"# Only a title"}},
		{"a heading last stays", "Text.\n\n## Later\n", []string{"Text.", "## Later"}},
		{"not a heading", "#hashtag\n\nText.", []string{"#hashtag", "Text."}},
		{"a long paragraph under a title", "# T\n\n" + long, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := resource.Passages(tt.body)
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Fatalf("Passages(%q) = %q, want %q", tt.body, got, tt.want)
			}
			normal := strings.ReplaceAll(tt.body, "\r\n", "\n")
			for i, p := range got {
				if !strings.Contains(normal, p) {
					t.Errorf("passage %d %q is not a span of the body", i, p)
				}
				if i < len(got)-1 && isHeading(p) {
					t.Errorf("passage %d %q is a heading alone, of %q", i, p, got)
				}
				if len(p) > 900 {
					t.Errorf("passage %d is %d bytes long", i, len(p))
				}
			}
		})
	}
}

// isHeading reports whether a passage is only one Markdown heading line.
func isHeading(p string) bool {
	return strings.HasPrefix(p, "#") && !strings.Contains(p, "\n") && strings.Contains(p, " ")
}
