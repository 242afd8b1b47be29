package server_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turngate/turngate/errcode"
)

// TestErrorCodesAreDocumented enumerates the codes the server can emit —
// the closed set in errcode, and every code literal written anywhere in
// the server's source — and fails on one the README's "Limits and errors"
// does not document, or documents with the wrong retryability.
func TestErrorCodesAreDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Limits and errors")
	if !ok {
		t.Fatal(`README.md has no "Limits and errors" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{} // code -> retryable
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| (yes|no) \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented[m[1]] = m[2] == "yes"
	}
	for _, c := range errcode.Codes() {
		retryable, ok := documented[string(c)]
		if !ok {
			t.Errorf("%s is not documented in the README", c)
		} else if retryable != c.Retryable() {
			t.Errorf("%s: the README says retryable %v", c, retryable)
		}
	}
	for c := range documented {
		if !errcode.Known(errcode.Code(c)) {
			t.Errorf("the README documents %s, which is not in the closed set", c)
		}
	}
	for _, lit := range codeLiterals(t, "..") {
		if !errcode.Known(errcode.Code(lit.code)) {
			t.Errorf("%s: the code %q is not in the closed set", lit.pos, lit.code)
		}
	}
}

type codeLiteral struct{ pos, code string }

// codeLiterals finds every string literal the module's non-test source
// writes as a GraphQL error code: the value of a "code" key, and every
// errcode.Code("...") conversion.
func codeLiterals(t *testing.T, root string) []codeLiteral {
	t.Helper()
	var out []codeLiteral
	fset := gotoken.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "ent" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var lit *ast.BasicLit
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.BasicLit); ok && k.Value == `"code"` {
					lit, _ = n.Value.(*ast.BasicLit)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" && len(n.Args) == 1 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "errcode" {
						lit, _ = n.Args[0].(*ast.BasicLit)
					}
				}
			}
			if lit != nil && lit.Kind == gotoken.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, codeLiteral{fset.Position(lit.Pos()).String(), s})
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
