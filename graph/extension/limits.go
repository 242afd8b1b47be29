package extension

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
)

// ExpandedFactor is how many times MaxFields a document may select once
// its fragments are expanded: fragments are written to be reused.
const ExpandedFactor = 10

// QueryLimit is the gqlgen extension that bounds a query document before
// gqlgen parses and validates it, in one linear lexer pass (scanDocument)
// that builds no tree:
//   - MaxBytes: longer is PAYLOAD_TOO_LARGE;
//   - MaxTokens, or AnonMaxTokens for a request without an identity
//     (all it can run is __typename and introspection): more tokens,
//     comments included, is PAYLOAD_TOO_LARGE. Parsing costs up to some
//     400 bytes of tree a token: 64 KiB of list values is 6 MB;
//   - MaxFields selections (fields and fragment spreads as written, each
//     spread counted, also of one fragment again) and MaxFragments
//     fragment definitions: more is GRAPHQL_VALIDATION_FAILED. Validation
//     is quadratic in the selections that may overlap: measured, 64 KiB of
//     "{ me { id id id ... } }" takes some 16 s of CPU and 13,000 spreads
//     of one fragment 0.5 to 3 s, 500 fields about 10 ms;
//   - ExpandedFactor × MaxFields selections once every fragment spread
//     is expanded (summed over the definitions, each fragment sized once):
//     more is GRAPHQL_VALIDATION_FAILED. A fragment that spreads the one
//     before twice doubles it, and gqlgen's complexity walk visits every
//     expanded field: 25 such fragments took 18 s of CPU, 40 for ever.
//
// Then, when Budget is set, the document takes its weight (queryCost) of
// the replica's ParseBudget until gqlgen has parsed and validated it;
// past the budget it is RATE_LIMITED. A document already in Cache was
// bounded when it was first seen and costs no parse: it passes.
type QueryLimit struct {
	MaxBytes      int64
	MaxTokens     int
	AnonMaxTokens int
	MaxFields     int
	MaxFragments  int
	Cache         graphql.Cache[*ast.QueryDocument]
	Budget        *ParseBudget
}

var (
	_ graphql.HandlerExtension          = QueryLimit{}
	_ graphql.OperationParameterMutator = QueryLimit{}
)

func (QueryLimit) ExtensionName() string                   { return "QueryLimit" }
func (QueryLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l QueryLimit) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if p.Query == "" {
		return nil
	}
	if l.Cache != nil && int64(len(p.Query)) <= l.MaxBytes {
		if _, ok := l.Cache.Get(ctx, p.Query); ok {
			return nil
		}
	}
	_, member := authority.IdentityFromContext(ctx)
	tokens, err := l.Bound(p.Query, member)
	if err != nil {
		if err.Code == errcode.ValidationFailed {
			return validationError(err.Message)
		}
		return coded(err)
	}
	if l.Budget == nil {
		return nil
	}
	if err := l.Budget.take(ctx, queryWeight(len(p.Query), tokens), !member); err != nil {
		return coded(err)
	}
	return nil
}

// Bound applies the document bounds to query, sent by a member or not
// (see QueryLimit), and returns its tokens, comments included, or the
// refusal: PAYLOAD_TOO_LARGE or GRAPHQL_VALIDATION_FAILED. It costs one
// lexer pass over at most the token bound.
func (l QueryLimit) Bound(query string, member bool) (int, *errcode.Error) {
	if n := int64(len(query)); n > l.MaxBytes {
		return 0, errcode.New(errcode.PayloadTooLarge, "the query document is %d bytes; the limit is %d", n, l.MaxBytes)
	}
	maxTokens := l.MaxTokens
	if !member {
		maxTokens = l.AnonMaxTokens
	}
	c := scanDocument(query, maxTokens)
	switch {
	case maxTokens > 0 && c.tokens > maxTokens && member:
		return 0, errcode.New(errcode.PayloadTooLarge, "the query document has more than %d tokens", maxTokens)
	case maxTokens > 0 && c.tokens > maxTokens:
		return 0, errcode.New(errcode.PayloadTooLarge,
			"the query document has more than %d tokens, the limit without an identity envelope", maxTokens)
	case l.MaxFields > 0 && c.selections > l.MaxFields:
		return 0, errcode.New(errcode.ValidationFailed, "the document selects more than %d fields and fragment spreads", l.MaxFields)
	case l.MaxFragments > 0 && c.fragments > l.MaxFragments:
		return 0, errcode.New(errcode.ValidationFailed, "the document defines more than %d fragments", l.MaxFragments)
	case l.MaxFields > 0 && c.expanded > ExpandedFactor*l.MaxFields:
		return 0, errcode.New(errcode.ValidationFailed,
			"the document selects more than %d fields and fragment spreads once its fragments are expanded", ExpandedFactor*l.MaxFields)
	}
	return c.tokens, nil
}

// coded is e as a gqlgen error that carries its extensions already:
// gqlgen's WebSocket transport sends a refusal of the parameters without
// presenting it.
func coded(e *errcode.Error) *gqlerror.Error {
	return Present(&gqlerror.Error{Message: e.Message, Err: e}, e.Code, e)
}

// ComplexityLimit is gqlgen's FixedComplexityLimit answering like every
// other validation failure: GRAPHQL_VALIDATION_FAILED, which gqlgen's
// transports answer with HTTP 422 (and an `error` on a WebSocket), where
// its own code, COMPLEXITY_LIMIT_EXCEEDED, is answered HTTP 200.
type ComplexityLimit struct{ *extension.ComplexityLimit }

// NewComplexityLimit refuses operations more complex than limit.
func NewComplexityLimit(limit int) ComplexityLimit {
	return ComplexityLimit{extension.FixedComplexityLimit(limit)}
}

var _ graphql.OperationContextMutator = ComplexityLimit{}

func (c ComplexityLimit) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	err := c.ComplexityLimit.MutateOperationContext(ctx, rc)
	if err != nil {
		err.Extensions = map[string]any{"code": string(errcode.ValidationFailed)}
	}
	return err
}

// docCounts is what scanDocument counts of a document.
type docCounts struct {
	tokens     int // every token, comments included
	selections int // fields (an alias and its field once) and fragment spreads
	fragments  int // fragment definitions
	// expanded is selections with every fragment spread replaced by what
	// the fragment selects, summed over the definitions (at most
	// maxExpanded): what validation and the complexity walk visit.
	expanded int
}

// maxExpanded is where docCounts.expanded stops counting: a fragment
// that spreads the one before twice doubles it.
const maxExpanded = 1 << 30

// definition is one operation or fragment definition as scanDocument sees
// it: its own fields, and the fragments it spreads, by name.
type definition struct {
	name    string // a fragment's; "" for an operation
	fields  int
	spreads []string
	// size is the definition's selections once expanded; sizing marks a
	// definition being sized (a cycle, which validation refuses).
	size   int
	sized  bool
	sizing bool
}

// scanDocument counts a document's tokens, selections and fragment
// definitions with the lexer alone, stopping once it has counted more
// than maxTokens (when positive). It reads the document the way the
// parser will without building a tree: in an executable document every
// value, object values included, is inside parentheses (arguments,
// variable definitions), so a brace outside them is a selection set's and
// a name in a selection set is a field, an alias, a spread or a fragment's
// type condition or a directive, told apart by the token before it. On a
// document that does not lex it returns what it counted so far; the
// parser then reports the error, within the same bound. For a document
// that parses the counts are exact.
func scanDocument(query string, maxTokens int) docCounts {
	var c docCounts
	lex := lexer.New(&ast.Source{Input: query})
	var prev, prev2 lexer.Token
	parens, depth := 0, 0
	definitionStart := true
	var defs []*definition
	var cur *definition
	for {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			break
		}
		if c.tokens++; maxTokens > 0 && c.tokens > maxTokens {
			break
		}
		startsDefinition := false
		if tok.Kind != lexer.Comment && definitionStart {
			cur = &definition{}
			defs = append(defs, cur)
		}
		switch tok.Kind {
		case lexer.Comment:
			continue
		case lexer.ParenL:
			parens++
		case lexer.ParenR:
			parens = max(0, parens-1)
		case lexer.BraceL:
			if parens == 0 {
				depth++
			}
		case lexer.BraceR:
			if parens == 0 && depth > 0 {
				depth--
				startsDefinition = depth == 0
			}
		case lexer.Name:
			switch {
			case parens > 0:
			case depth == 0:
				if definitionStart && tok.Value == "fragment" {
					c.fragments++
				} else if prev.Kind == lexer.Name && prev.Value == "fragment" && cur.name == "" && len(defs) > 0 {
					cur.name = tok.Value
				}
			case prev.Kind == lexer.At, prev.Kind == lexer.Colon:
				// A directive's name; a field's name after its alias.
			case prev.Kind == lexer.Spread:
				if tok.Value != "on" {
					c.selections++ // a fragment spread
					cur.spreads = append(cur.spreads, tok.Value)
				}
			case prev.Kind == lexer.Name && prev.Value == "on" && prev2.Kind == lexer.Spread:
				// An inline fragment's type condition.
			default:
				c.selections++
				cur.fields++
			}
		}
		definitionStart = startsDefinition
		prev2, prev = prev, tok
	}
	c.expanded = expandedSize(defs)
	return c
}

// expandedSize sums the definitions' selections with every spread of a
// known fragment expanded, each fragment sized once.
func expandedSize(defs []*definition) int {
	fragments := map[string]*definition{}
	for _, d := range defs {
		if d.name != "" && fragments[d.name] == nil {
			fragments[d.name] = d
		}
	}
	var size func(d *definition) int
	size = func(d *definition) int {
		if d.sized || d.sizing {
			return d.size
		}
		d.sizing = true
		n := d.fields + len(d.spreads)
		for _, name := range d.spreads {
			if f := fragments[name]; f != nil {
				n = min(n+size(f), maxExpanded)
			}
		}
		d.size, d.sized, d.sizing = n, true, false
		return n
	}
	total := 0
	for _, d := range defs {
		total = min(total+size(d), maxExpanded)
	}
	return total
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
	return queryWeight(len(query), int(tokens))
}

// queryWeight is what a document of textBytes bytes and tokens tokens
// (comments included) may hold once parsed and validated.
func queryWeight(textBytes, tokens int) int64 {
	return queryTextFactor*int64(textBytes) + int64(tokens)*queryTokenCost
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
