package graph

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/turngate/turngate/errcode"
)

// QueryLimit is the gqlgen extension that refuses, before gqlgen parses
// and validates it, a query document longer than MaxBytes
// (PAYLOAD_TOO_LARGE) or with more than MaxFields field selections
// (GRAPHQL_VALIDATION_FAILED). The second bound is there because
// validation is quadratic in the fields that may overlap: measured, 64 KiB
// of "{ me { id id id ... } }" takes some 16 s of CPU to validate, 500
// fields about 10 ms. Counting parses the document once more, which is
// linear; a document already in Cache was counted when it was first seen.
type QueryLimit struct {
	MaxBytes  int64
	MaxFields int
	Cache     graphql.Cache[*ast.QueryDocument]
}

var (
	_ graphql.HandlerExtension          = QueryLimit{}
	_ graphql.OperationParameterMutator = QueryLimit{}
)

func (QueryLimit) ExtensionName() string                   { return "QueryLimit" }
func (QueryLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l QueryLimit) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if n := int64(len(p.Query)); n > l.MaxBytes {
		e := errcode.New(errcode.PayloadTooLarge, "the query document is %d bytes; the limit is %d", n, l.MaxBytes)
		return &gqlerror.Error{Message: e.Message, Err: e}
	}
	if l.MaxFields <= 0 || p.Query == "" {
		return nil
	}
	if l.Cache != nil {
		if _, ok := l.Cache.Get(ctx, p.Query); ok {
			return nil
		}
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: p.Query})
	if err != nil {
		return nil // gqlgen reports it, with its position
	}
	if n := countFields(doc, l.MaxFields); n > l.MaxFields {
		return validationError(fmt.Sprintf("the document selects more than %d fields", l.MaxFields))
	}
	return nil
}

// countFields counts a document's field selections as written (a
// fragment once), stopping past limit.
func countFields(doc *ast.QueryDocument, limit int) int {
	n := 0
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			if n > limit {
				return
			}
			switch sel := sel.(type) {
			case *ast.Field:
				n++
				walk(sel.SelectionSet)
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
	return n
}

// QueryCache is gqlgen's parsed-query cache bounded by bytes rather than
// entries: each document costs what queryCost weighs its text at (the key
// it is held under plus the syntax tree parsed from it), and the least
// recently used documents are dropped to stay within the budget. An entry
// bound alone lets a few large documents hold hundreds of MiB.
type QueryCache[T any] struct {
	mu     sync.Mutex
	budget int64
	used   int64
	order  *list.List // of *queryEntry[T], most recently used first
	byKey  map[string]*list.Element
}

// What a cached document weighs. Its text is held twice at most: as the
// key, and in the strings the parser unescapes from it. Its tree holds at
// most a node per token, comments included, and a node with what
// validation hangs on it weighs up to about 400 bytes (measured: a
// __typename field, which gets a definition of its own; a list value
// 216, a field 225, a comment 97). Weighing the text alone, at four times
// its length, let 64 KiB of comment lines or of list items, 3 to 7 MB of
// tree each, pass for 256 KiB.
const (
	queryTextFactor = 2
	queryTokenCost  = 512
)

// queryCost weighs a document by its text and its tokens. One that does
// not lex (gqlgen caches only documents that parsed) outweighs any budget.
func queryCost(query string) int64 {
	lex := lexer.New(&ast.Source{Input: query})
	var tokens int64
	for {
		tok, err := lex.ReadToken()
		if err != nil {
			return math.MaxInt64
		}
		if tok.Kind == lexer.EOF {
			break
		}
		tokens++
	}
	return queryTextFactor*int64(len(query)) + tokens*queryTokenCost
}

type queryEntry[T any] struct {
	key   string
	value T
	cost  int64
}

// NewQueryCache returns a cache holding at most budget bytes of documents.
func NewQueryCache[T any](budget int64) *QueryCache[T] {
	return &QueryCache[T]{budget: budget, order: list.New(), byKey: map[string]*list.Element{}}
}

var _ graphql.Cache[any] = (*QueryCache[any])(nil)

// Get implements graphql.Cache.
func (c *QueryCache[T]) Get(_ context.Context, key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		var zero T
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*queryEntry[T]).value, true
}

// Add implements graphql.Cache. A document costing more than the whole
// budget is not kept.
func (c *QueryCache[T]) Add(_ context.Context, key string, value T) {
	cost := queryCost(key)
	if cost > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	for c.used+cost > c.budget {
		last := c.order.Back()
		e := last.Value.(*queryEntry[T])
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.used -= e.cost
	}
	c.byKey[key] = c.order.PushFront(&queryEntry[T]{key: key, value: value, cost: cost})
	c.used += cost
}

// Used is the cost of the documents held, in bytes.
func (c *QueryCache[T]) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// QueryShape is the gqlgen extension that bounds an operation's shape
// after it validates: selections at most MaxDepth fields deep
// (introspection included: its ofType chains are fields like any other),
// and no introspection at all when Introspection is false. Both refusals
// are GRAPHQL_VALIDATION_FAILED.
type QueryShape struct {
	MaxDepth      int
	Introspection bool
}

var (
	_ graphql.HandlerExtension        = QueryShape{}
	_ graphql.OperationContextMutator = QueryShape{}
)

func (QueryShape) ExtensionName() string                   { return "QueryShape" }
func (QueryShape) Validate(graphql.ExecutableSchema) error { return nil }

func (s QueryShape) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if rc.Operation == nil {
		return nil
	}
	if readOnly, _ := ctx.Value(readOnlyKey{}).(bool); readOnly && rc.Operation.Operation != ast.Query {
		e := errcode.New(errcode.BadUserInput, "a GET request runs queries only: send %s operations with POST", rc.Operation.Operation)
		return &gqlerror.Error{Message: e.Message, Err: e}
	}
	w := shapeWalker{frags: rc.Doc.Fragments, limit: s.MaxDepth}
	depth := w.depth(rc.Operation.SelectionSet, 0)
	switch {
	case !s.Introspection && w.introspects:
		return validationError("introspection is disabled on this server")
	case depth > s.MaxDepth:
		return validationError(fmt.Sprintf("the operation nests fields more than %d deep", s.MaxDepth))
	}
	return nil
}

type readOnlyKey struct{}

// NewContextReadOnly marks a request that may run queries only (an HTTP
// GET, which caches and prefetchers repeat at will); QueryShape refuses
// anything else with BAD_USER_INPUT before gqlgen would refuse it
// without a code.
func NewContextReadOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

func validationError(msg string) *gqlerror.Error {
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(errcode.ValidationFailed)}}
}

// shapeWalker measures a selection set's depth through fragments. It
// stops descending past the limit and measures each fragment once, so no
// document costs more than its size times the limit.
type shapeWalker struct {
	frags       ast.FragmentDefinitionList
	limit       int
	introspects bool
	fragDepth   map[string]int // a fragment's own depth, once measured
}

func (w *shapeWalker) depth(set ast.SelectionSet, at int) int {
	deepest := at
	if at > w.limit {
		return at
	}
	for _, sel := range set {
		var d int
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Name == "__schema" || sel.Name == "__type" {
				w.introspects = true
			}
			d = w.depth(sel.SelectionSet, at+1)
		case *ast.InlineFragment:
			d = w.depth(sel.SelectionSet, at)
		case *ast.FragmentSpread:
			rel, ok := w.fragDepth[sel.Name]
			if !ok {
				if w.fragDepth == nil {
					w.fragDepth = map[string]int{}
				}
				w.fragDepth[sel.Name] = 0 // cycles do not validate; guard anyway
				if f := w.frags.ForName(sel.Name); f != nil {
					rel = w.depth(f.SelectionSet, 0)
				}
				w.fragDepth[sel.Name] = rel
			}
			d = at + rel
		}
		deepest = max(deepest, d)
	}
	return deepest
}
