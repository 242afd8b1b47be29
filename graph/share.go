package graph

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// This file encodes a room's new entry once for all of its subscribers.
//
// gqlgen runs the executor for every event of every subscription: the
// generated code reads the resolver's channel and marshals the value
// against the subscriber's selection set, field by field, each field with
// a context of its own. With ten thousand watchers of one room, that is
// ten thousand executions of the same selection over the same value per
// answer delta (~85 µs of CPU each). The journal and tokens streams
// already share the converted value (entryCache): every watcher who reads
// an entry the same way gets the same *model.JournalEntry. ShareStreams
// adds the other half. The first subscriber to need a value in a given
// operation shape runs gqlgen's own marshalling for it, exactly as before;
// the bytes are kept, and every other subscriber with that shape gets
// them. Everything else — parsing, validation, arguments, the resolver
// call and its errors, the response interceptors, the transports — is
// gqlgen's, unchanged.
//
// The bytes depend on the value and the shape alone because no type a
// journal entry or an answer delta reaches has a field resolver: nothing
// in their encoding reads the viewer (TestSharedTypesHaveNoResolvers).
// The viewer is in the value: feed projects each entry for its viewer,
// and entryCache shares a projection only between viewers who read it
// identically.

// ShareStreams wraps the generated schema so that the journal and tokens
// subscriptions encode each shared value once per operation shape (see
// above). Queries, mutations and every other part of an operation run
// through es unchanged. counted, when not nil, is told of every event
// sent, and whether its bytes were shared.
func ShareStreams(es graphql.ExecutableSchema, counted func(shared bool)) graphql.ExecutableSchema {
	if counted == nil {
		counted = func(bool) {}
	}
	return &sharedSchema{ExecutableSchema: es, counted: counted}
}

type sharedSchema struct {
	graphql.ExecutableSchema
	counted func(shared bool)
	enc     encodings
}

// Exec runs the operation as es would. A subscription whose resolver
// handed its stream over (shareStream) is then served from that stream:
// a value seen before in the same shape gets the bytes encoded the first
// time; another is handed to gqlgen's own handler to encode.
func (s *sharedSchema) Exec(ctx context.Context) graphql.ResponseHandler {
	if !graphql.HasOperationContext(ctx) {
		return s.ExecutableSchema.Exec(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return s.ExecutableSchema.Exec(ctx)
	}
	// What the subscription field's resolver chain returned to gqlgen: the
	// stream is served here only if that is the channel shareStream made
	// (a resolver that wraps another's stream, as a test's may, reads it
	// itself).
	var returned any
	chain := oc.ResolverMiddleware
	oc.ResolverMiddleware = func(ctx context.Context, next graphql.Resolver) (any, error) {
		res, err := chain(ctx, next)
		if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "Subscription" {
			returned = res
		}
		return res, err
	}
	slot := &streamSlot{}
	encode := s.ExecutableSchema.Exec(context.WithValue(ctx, slotKey{}, slot))
	oc.ResolverMiddleware = chain
	if slot.out == nil {
		return encode // the resolver failed, or streams as gqlgen does
	}
	if returned != slot.out {
		slot.pump()
		return encode
	}
	shape := shapeOf(oc)
	return func(ctx context.Context) *graphql.Response {
		v, ok := slot.next(ctx)
		if !ok {
			return nil
		}
		own := func() *graphql.Response {
			slot.hand(v)
			return encode(ctx)
		}
		resp, reused := s.enc.response(ctx, encodingKey{shape: shape, value: v}, own)
		if resp != nil {
			s.counted(reused)
		}
		return resp
	}
}

// streamSlot is where a subscription resolver under ShareStreams hands
// its stream over. next blocks for the stream's next value (ok false at
// its end or ctx's).
// hand gives a value to the channel gqlgen's generated handler reads, to
// be encoded the next time that handler runs.
type streamSlot struct {
	out  any // the channel shareStream returned
	next func(ctx context.Context) (v any, ok bool)
	hand func(v any)
	// pump copies the stream into out in a goroutine of its own, when
	// the stream is not served here.
	pump func()
}

type slotKey struct{}

// shareStream hands src to the ShareStreams wrapper running the
// operation of ctx, and returns the channel the generated handler is to
// read, which the wrapper feeds. Without the wrapper (a schema executed
// without it), it returns src.
func shareStream[T any](ctx context.Context, src <-chan T) <-chan T {
	slot, _ := ctx.Value(slotKey{}).(*streamSlot)
	if slot == nil || slot.out != nil {
		return src
	}
	direct := make(chan T, 1)
	out := (<-chan T)(direct)
	slot.out = out
	slot.hand = func(v any) { direct <- v.(T) }
	slot.pump = func() {
		go func() {
			for v := range src {
				select {
				case direct <- v:
				case <-ctx.Done():
					return
				}
			}
			close(direct)
		}()
	}
	slot.next = func(ctx context.Context) (any, bool) {
		select {
		case v, ok := <-src:
			return v, ok
		case <-ctx.Done():
			return nil, false
		}
	}
	return out
}

// shape is what, besides the value, an encoding depends on: the parsed
// operation (gqlgen keeps one per distinct document, so subscribers that
// sent the same document share it) and the values of the variables its
// directives read (@include, @skip).
type shape struct {
	op   *ast.OperationDefinition
	vars string
}

// shapeOf is the shape of the operation oc runs.
func shapeOf(oc *graphql.OperationContext) shape {
	var vars strings.Builder
	for _, name := range directiveVariables(oc.Doc, oc.Operation) {
		fmt.Fprintf(&vars, "%s=%v;", name, oc.Variables[name])
	}
	return shape{op: oc.Operation, vars: vars.String()}
}

// directiveVariables names the variables the directives of op's
// selections (and of the fragments they spread) read, each once.
func directiveVariables(doc *ast.QueryDocument, op *ast.OperationDefinition) []string {
	var names []string
	seen := map[string]bool{}
	visited := map[string]bool{}
	var walk func(ast.SelectionSet)
	directives := func(ds ast.DirectiveList) {
		for _, d := range ds {
			for _, a := range d.Arguments {
				for _, v := range variablesIn(a.Value) {
					if !seen[v] {
						seen[v] = true
						names = append(names, v)
					}
				}
			}
		}
	}
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				directives(s.Directives)
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				directives(s.Directives)
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				directives(s.Directives)
				if visited[s.Name] {
					continue
				}
				visited[s.Name] = true
				if doc != nil {
					if f := doc.Fragments.ForName(s.Name); f != nil {
						directives(f.Directives)
						walk(f.SelectionSet)
					}
				}
			}
		}
	}
	walk(op.SelectionSet)
	return names
}

// variablesIn names the variables a value reads.
func variablesIn(v *ast.Value) []string {
	if v == nil {
		return nil
	}
	if v.Kind == ast.Variable {
		return []string{v.Raw}
	}
	var out []string
	for _, c := range v.Children {
		out = append(out, variablesIn(c.Value)...)
	}
	return out
}

// encodingCacheSize bounds the encodings kept: a room's newest entries in
// the few shapes its clients subscribe with.
const encodingCacheSize = 4096

// encodingKey is a value in a shape. Both are pointers (the value a
// shared *model.JournalEntry or *model.AnswerDelta) that the key keeps
// alive, so a key is never confused with a later value at the same
// address.
type encodingKey struct {
	shape shape
	value any
}

// encodings are the responses encoded for shared values, by shape, first
// in first out.
type encodings struct {
	mu    sync.Mutex
	byKey map[encodingKey]*encoding
	order []encodingKey
}

// encoding is one value's response in one shape: data once done is
// closed, nil if its encoder could not finish (its subscriber went away,
// or the encoding reported errors, which stay that subscriber's).
type encoding struct {
	done chan struct{}
	data []byte
}

// response is the response for key: the kept encoding's bytes (reused
// true), or, when there is none, own's, kept for the next subscriber.
// Concurrent callers of one key wait for the first one's encoding.
func (c *encodings) response(ctx context.Context, key encodingKey, own func() *graphql.Response) (resp *graphql.Response, reused bool) {
	for {
		c.mu.Lock()
		if c.byKey == nil {
			c.byKey = make(map[encodingKey]*encoding, encodingCacheSize)
		}
		e, ok := c.byKey[key]
		if !ok {
			e = &encoding{done: make(chan struct{})}
			if len(c.order) >= encodingCacheSize {
				delete(c.byKey, c.order[0])
				c.order = c.order[1:]
			}
			c.byKey[key] = e
			c.order = append(c.order, key)
		}
		c.mu.Unlock()
		if !ok {
			resp = own()
			if resp != nil && len(resp.Errors) == 0 && len(graphql.GetErrors(ctx)) == 0 && resp.Data != nil {
				e.data = bytes.Clone(resp.Data)
			} else {
				c.mu.Lock()
				if c.byKey[key] == e {
					delete(c.byKey, key) // its place in order goes when it comes up
				}
				c.mu.Unlock()
			}
			close(e.done)
			return resp, false
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, false
		}
		if e.data != nil {
			return &graphql.Response{Data: e.data}, true
		}
		// The first encoder gave up: try again, encoding it if need be.
	}
}
