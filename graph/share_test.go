package graph

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/graph/generated"
	"github.com/turngate/turngate/graph/model"
)

// TestSharedTypesHaveNoResolvers: ShareStreams gives one viewer the bytes
// encoded for another, which is right only while nothing in the encoding
// of a journal entry or an answer delta reads the viewer. A field
// resolver could (it gets the request's context): no type the two reach
// may have one.
func TestSharedTypesHaveNoResolvers(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	withResolvers := map[string]bool{}
	root := reflect.TypeFor[generated.ResolverRoot]()
	for i := range root.NumMethod() {
		withResolvers[root.Method(i).Name] = true
	}
	if !withResolvers["Turn"] || !withResolvers["Subscription"] {
		t.Fatalf("resolver objects %v: the reflection no longer finds them", withResolvers)
	}
	seen := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		def := schema.Types[name]
		if def == nil || seen[name] {
			return
		}
		seen[name] = true
		if withResolvers[name] {
			t.Errorf("%s is reached from JournalEntry or AnswerDelta and has field resolvers: its encoding may depend on the viewer", name)
		}
		for _, f := range def.Fields {
			walk(f.Type.Name())
		}
		for _, p := range schema.GetPossibleTypes(def) {
			walk(p.Name)
		}
	}
	walk("JournalEntry")
	walk("AnswerDelta")
	if !seen["TurnTerminal"] || !seen["ToolActivity"] {
		t.Fatalf("walked %v: the union members were not reached", seen)
	}
}

// TestEncodingsShareOneEncoding: concurrent subscribers of one value in
// one shape wait for one encoding and get its bytes; another shape or
// another value is encoded again; an encoding that fails (its subscriber
// went away, or it reported errors) is not kept, and the next subscriber
// encodes for itself.
func TestEncodingsShareOneEncoding(t *testing.T) {
	var c encodings
	ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, nil)
	op := &ast.OperationDefinition{}
	v := &model.JournalEntry{Seq: 1}
	key := encodingKey{shape: shape{op: op}, value: v}
	var calls atomic.Int32
	release := make(chan struct{})
	own := func() *graphql.Response {
		calls.Add(1)
		<-release
		return &graphql.Response{Data: []byte(`{"journal":{"seq":1}}`)}
	}
	var wg sync.WaitGroup
	var reused atomic.Int32
	for range 20 {
		wg.Go(func() {
			resp, r := c.response(ctx, key, own)
			if string(resp.Data) != `{"journal":{"seq":1}}` {
				t.Errorf("data %s", resp.Data)
			}
			if r {
				reused.Add(1)
			}
		})
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 || reused.Load() != 19 {
		t.Fatalf("%d encodings for 20 subscribers, %d reused; want 1 and 19", calls.Load(), reused.Load())
	}

	other := func(data string) func() *graphql.Response {
		return func() *graphql.Response { calls.Add(1); return &graphql.Response{Data: []byte(data)} }
	}
	calls.Store(0)
	c.response(ctx, encodingKey{shape: shape{op: op, vars: "text=true;"}, value: v}, other(`{"e":{"seq":1}}`))
	c.response(ctx, encodingKey{shape: shape{op: op}, value: &model.JournalEntry{Seq: 1}}, other(`{"journal":{"seq":1}}`))
	if calls.Load() != 2 {
		t.Fatalf("another shape and another value: %d encodings, want 2", calls.Load())
	}

	// A failed encoding: nil (its subscriber left), then one with errors.
	failed := encodingKey{shape: shape{op: op}, value: &model.JournalEntry{Seq: 2}}
	calls.Store(0)
	if resp, _ := c.response(ctx, failed, func() *graphql.Response { calls.Add(1); return nil }); resp != nil {
		t.Fatal("a nil encoding answered")
	}
	errs := func() *graphql.Response {
		calls.Add(1)
		return &graphql.Response{Data: []byte(`{"journal":null}`), Errors: gqlerror.List{{Message: "x"}}}
	}
	if resp, reused := c.response(ctx, failed, errs); reused || len(resp.Errors) != 1 {
		t.Fatalf("an encoding with errors: %+v, reused %v", resp, reused)
	}
	if resp, reused := c.response(ctx, failed, other(`{"journal":{"seq":2}}`)); reused || string(resp.Data) != `{"journal":{"seq":2}}` {
		t.Fatalf("after two failed encodings: %s, reused %v; want a fresh encoding", resp.Data, reused)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d encodings, want 3 (nothing failed was kept)", calls.Load())
	}
	if resp, reused := c.response(ctx, failed, other("")); !reused || string(resp.Data) != `{"journal":{"seq":2}}` {
		t.Fatalf("the good encoding was not kept: %s, reused %v", resp.Data, reused)
	}
}

// TestEncodingsBounded: the cache keeps at most encodingCacheSize
// encodings, the oldest going first.
func TestEncodingsBounded(t *testing.T) {
	var c encodings
	ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, nil)
	op := &ast.OperationDefinition{}
	first := encodingKey{shape: shape{op: op}, value: &model.JournalEntry{}}
	data := func() *graphql.Response { return &graphql.Response{Data: []byte(`{}`)} }
	c.response(ctx, first, data)
	for range encodingCacheSize + 10 {
		c.response(ctx, encodingKey{shape: shape{op: op}, value: &model.JournalEntry{}}, data)
	}
	if len(c.byKey) > encodingCacheSize || len(c.order) > encodingCacheSize {
		t.Fatalf("%d encodings kept (%d in order), bound %d", len(c.byKey), len(c.order), encodingCacheSize)
	}
	if _, ok := c.byKey[first]; ok {
		t.Fatal("the oldest encoding is still kept")
	}
}

// TestShapeReadsDirectiveVariables: two operations differ in shape by
// their document and by the variables their directives read, never by
// the others (a stream's room or position).
func TestShapeReadsDirectiveVariables(t *testing.T) {
	doc := &ast.QueryDocument{Fragments: ast.FragmentDefinitionList{{
		Name:         "F",
		SelectionSet: ast.SelectionSet{&ast.Field{Name: "text", Directives: ast.DirectiveList{{Name: "skip", Arguments: ast.ArgumentList{{Name: "if", Value: &ast.Value{Kind: ast.Variable, Raw: "hide"}}}}}}},
	}}}
	op := &ast.OperationDefinition{Operation: ast.Subscription, SelectionSet: ast.SelectionSet{&ast.Field{Name: "journal", SelectionSet: ast.SelectionSet{
		&ast.Field{Name: "seq", Directives: ast.DirectiveList{{Name: "include", Arguments: ast.ArgumentList{{Name: "if", Value: &ast.Value{Kind: ast.Variable, Raw: "seq"}}}}}},
		&ast.FragmentSpread{Name: "F"},
	}}}}
	at := func(vars map[string]any) shape {
		return shapeOf(&graphql.OperationContext{Doc: doc, Operation: op, Variables: vars})
	}
	a := at(map[string]any{"c": "room-1", "a": 1, "seq": true, "hide": false})
	if b := at(map[string]any{"c": "room-2", "a": 9, "seq": true, "hide": false}); a != b {
		t.Fatalf("room and position changed the shape: %+v vs %+v", a, b)
	}
	if b := at(map[string]any{"c": "room-1", "a": 1, "seq": true, "hide": true}); a == b {
		t.Fatal("a fragment's @skip variable did not change the shape")
	}
	if b := at(map[string]any{"c": "room-1", "a": 1, "seq": false, "hide": false}); a == b {
		t.Fatal("an @include variable did not change the shape")
	}
}
