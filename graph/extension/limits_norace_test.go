//go:build !race

package extension

// This file's test runs without -race only (make test runs the package a
// second time, in its plain pass, for it): it parses and validates
// documents, on one goroutine, and reads the heap; the race detector
// watches nothing there and makes it ten times slower.

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/turngate/turngate/graph/generated"
)

// TestQueryCostBoundsParsedDocument: queryCost is never less than what a
// parsed and validated document really holds, its text included, for
// each shape that makes a tree heavy per byte of text. Without the token
// weight, comment lines and list values held 12 to 19 times what they
// were weighed at. Not parallel: it measures the heap.
func TestQueryCostBoundsParsedDocument(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	// Small documents: validation is quadratic in fields that may
	// overlap, so "id id id" of 64 KiB would take 16 s here.
	const size, copies = 8 << 10, 8
	fill := func(head, fill, tail string) func(i int) string {
		return func(i int) string {
			head := fmt.Sprintf(head, i)
			var b strings.Builder
			b.WriteString(head)
			for n := 0; b.Len()+len(fill)+len(tail) <= size; n++ {
				if strings.Contains(fill, "%d") {
					fmt.Fprintf(&b, fill, n)
				} else {
					b.WriteString(fill)
				}
			}
			b.WriteString(tail)
			return b.String()
		}
	}
	shapes := []struct {
		name  string
		query func(i int) string
	}{
		{"one long comment", fill("query Q%d { me { id } } #", "x", "")},
		{"comment lines", fill("query Q%d { me {\n", "#\n", "id } }")},
		{"the same field", fill("query Q%d { me { ", "id ", "} }")},
		{"aliases", fill("query Q%d { me { ", "a%d:id ", "} }")},
		{"__typename", fill("query Q%d { ", "__typename ", "}")},
		{"inline fragments", fill("query Q%d { me { ", "...{a%d:id} ", "} }")},
		{"fragment spreads", fill("query Q%d { me { ", "...F ", "} } fragment F on Member { id }")},
		{"list values", fill(`query Q%d { me { id } } mutation M($d: [ID!] = [`, "1 ",
			`]) { submitMessage(input: {conversationId: "c", text: "t", idempotencyKey: "k", documentIds: $d}) { id } }`)},
		{"escaped string", fill(`query Q%d { documents(query: "`, `\u00e9`, `") { id } }`)},
		{"block string", fill(`query Q%d { documents(query: """`, "x\n ", `""") { id } }`)},
	}
	for _, tt := range shapes {
		heapBefore := liveHeap()
		queries := make([]string, copies)
		docs := make([]*ast.QueryDocument, copies)
		var weighed int64
		for i := range queries {
			// A copy: the text is the server's own, as gqlgen's key is.
			queries[i] = strings.Clone(tt.query(i))
			doc, err := parser.ParseQuery(&ast.Source{Input: queries[i]})
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if errs := validator.ValidateWithRules(schema, doc, rules.NewDefaultRules()); len(errs) > 0 {
				t.Fatalf("%s: %v", tt.name, errs[0])
			}
			docs[i] = doc
			weighed += queryCost(queries[i])
		}
		held := int64(liveHeap()) - int64(heapBefore)
		runtime.KeepAlive(queries)
		runtime.KeepAlive(docs)
		t.Logf("%-17s %5d bytes of text: holds %7d bytes, weighed %7d (%.1fx)", tt.name, len(queries[0]), held/copies, weighed/copies, float64(weighed)/float64(held))
		if held > weighed {
			t.Errorf("%s: %d documents hold %d bytes, weighed at %d", tt.name, copies, held, weighed)
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
