package extension

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// cacheKeys lists the keys c holds, most recently used first.
func cacheKeys[T any](c *QueryCache[T]) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for el := c.order.Front(); el != nil; el = el.Next() {
		keys = append(keys, el.Value.(*queryEntry[T]).key)
	}
	return keys
}

// TestQueryCacheLRU: the cache drops its least recently used documents to
// make room, Get counts as a use, adding a document it holds costs
// nothing more, and it never holds more than its budget.
func TestQueryCacheLRU(t *testing.T) {
	ctx := context.Background()
	// Keys of one length and token count cost the same.
	key := func(i int) string { return fmt.Sprintf("query Q%d { me { id } }", i) }
	cost := queryCost(key(0))
	c := NewQueryCache[int](3 * cost)
	check := func(step string, want ...int) {
		t.Helper()
		var keys []string
		for _, i := range want {
			keys = append(keys, key(i))
		}
		if got := cacheKeys(c); !slices.Equal(got, keys) {
			t.Fatalf("%s: holds %q, want %q", step, got, keys)
		}
		if got := c.Used(); got != int64(len(want))*cost || got > c.budget {
			t.Fatalf("%s: Used() = %d for %d documents of %d (budget %d)", step, got, len(want), cost, c.budget)
		}
	}

	for i := range 3 {
		c.Add(ctx, key(i), i)
	}
	check("three added", 2, 1, 0)
	if v, ok := c.Get(ctx, key(0)); !ok || v != 0 {
		t.Fatalf("Get(%q) = %v, %v", key(0), v, ok)
	}
	check("0 read", 0, 2, 1)
	c.Add(ctx, key(3), 3)
	check("3 added: 1 was least recently used", 3, 0, 2)
	if _, ok := c.Get(ctx, key(1)); ok {
		t.Fatal("an evicted document is still found")
	}
	c.Add(ctx, key(2), 2)
	check("2 added again: a use, not a second copy", 2, 3, 0)
	c.Add(ctx, key(4), 4)
	c.Add(ctx, key(5), 5)
	check("4 and 5 added", 5, 4, 2)
}

// TestQueryCacheRefusesOversizedDocument: a document costing more than
// the whole budget is not kept and evicts nothing; one costing exactly the
// budget is kept alone.
func TestQueryCacheRefusesOversizedDocument(t *testing.T) {
	ctx := context.Background()
	small := "{ me { id } }"
	big := "{ me { id email displayName } }"
	c := NewQueryCache[string](queryCost(small) + queryCost(big) - 1)
	c.Add(ctx, small, small)
	tooBig := "{ me { id } } # " + strings.Repeat("x", int(c.budget))
	c.Add(ctx, tooBig, tooBig)
	if got := cacheKeys(c); !slices.Equal(got, []string{small}) {
		t.Fatalf("after an oversized document the cache holds %q", got)
	}
	c.Add(ctx, big, big)
	if got := cacheKeys(c); !slices.Equal(got, []string{big}) || c.Used() > c.budget {
		t.Fatalf("the cache holds %q, %d of %d bytes", got, c.Used(), c.budget)
	}
	exact := NewQueryCache[string](queryCost(big))
	exact.Add(ctx, big, big)
	if _, ok := exact.Get(ctx, big); !ok {
		t.Fatal("a document costing exactly the budget was not kept")
	}
	if got := queryCost(`{ me { id } } "unterminated`); got <= c.budget {
		t.Fatalf("a document that does not lex costs %d", got)
	}
}

// TestScanDocumentCounts: the lexer pass counts what the parser builds —
// selections (fields, an alias with its field once, and fragment spreads,
// each spread again), the selections once every spread is expanded,
// fragment definitions and tokens, comments included — on documents that
// use every place a name or a brace may stand.
func TestScanDocumentCounts(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{ __typename }`,
		`# a comment
		query Q($fragment: [ID!] = ["on", "fragment"], $o: In = {a: {b: [1, {c: 2}]}}) @dir(on: {fragment: 1}) {
		  me { id email: displayName ... on Member { id } ... @include(if: true) { on: id } ...F ...F }
		  fragment: conversations(first: 10, filter: {query: "{ not a selection }"}) { edges { node { id } } }
		}
		fragment F on Member @dir(x: [{y: 1}]) { id ...G }
		fragment G on Member { displayName # trailing
		}
		subscription S { journal(conversationId: "c") { seq } }`,
		`query fragment { on: __typename ... on on { on } } fragment F on on { x }`,
		"{ a(b: \"\"\"block { string } ...F\"\"\") { c } }",
		`query { ...F3 } fragment F0 on Query { a } fragment F1 on Query { ...F0 ...F0 }
		fragment F2 on Query { ...F1 b ...F1 } fragment F3 on Query { c { ...F2 ...F2 } }`,
	}
	for _, q := range docs {
		doc, err := parser.ParseQuery(&ast.Source{Input: q})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		var want docCounts
		var walk func(ast.SelectionSet)
		walk = func(set ast.SelectionSet) {
			for _, sel := range set {
				switch sel := sel.(type) {
				case *ast.Field:
					want.selections++
					walk(sel.SelectionSet)
				case *ast.FragmentSpread:
					want.selections++
				case *ast.InlineFragment:
					walk(sel.SelectionSet)
				}
			}
		}
		for _, op := range doc.Operations {
			walk(op.SelectionSet)
		}
		for _, f := range doc.Fragments {
			walk(f.SelectionSet)
		}
		want.fragments = len(doc.Fragments)
		// expanded: each definition's selections, a spread replaced by
		// the fragment's own, summed.
		var size func(ast.SelectionSet) int
		size = func(set ast.SelectionSet) int {
			n := 0
			for _, sel := range set {
				switch sel := sel.(type) {
				case *ast.Field:
					n += 1 + size(sel.SelectionSet)
				case *ast.FragmentSpread:
					n++
					if f := doc.Fragments.ForName(sel.Name); f != nil {
						n += size(f.SelectionSet)
					}
				case *ast.InlineFragment:
					n += size(sel.SelectionSet)
				}
			}
			return n
		}
		for _, op := range doc.Operations {
			want.expanded += size(op.SelectionSet)
		}
		for _, f := range doc.Fragments {
			want.expanded += size(f.SelectionSet)
		}
		lex := lexer.New(&ast.Source{Input: q})
		for {
			tok, err := lex.ReadToken()
			if err != nil || tok.Kind == lexer.EOF {
				break
			}
			want.tokens++
		}
		if got := scanDocument(q, 0); got != want {
			t.Errorf("%.60q: scanned %+v, parsed %+v", q, got, want)
		}
		if got := scanDocument(q, 5); want.tokens > 5 && got.tokens != 6 {
			t.Errorf("%.60q: with a limit of 5 tokens, counted %d", q, got.tokens)
		}
	}
}
