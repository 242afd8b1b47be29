package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// Tests of the bounds (DESIGN §10) on the parsed-query cache, the depth of
// a selection, introspection and validation suggestions, each failing
// without its bound. The body and the plain query-document bounds are
// tested on a real process in rss_test.go.

// TestQueryCacheHeavyDocuments: 1,000 distinct valid documents of exactly
// the maximum size, in shapes whose syntax trees outweigh their text many
// times over while selecting few enough fields to pass MaxFields (a
// comment token per two bytes, a list value per two bytes, 401 fields),
// leave the replica's resident memory within 64 MiB of idle. Each is
// parsed, validated, offered to the parsed-query cache and run.
// TestQueryCacheMemory does the same with documents as light as their
// text. When the cache weighed a document by its text alone, this grew by
// 377 MiB.
//
// The documents go one at a time: the subject is what the replica keeps.
// What it holds in flight grows with the requests parsed at once (a 64
// KiB document of comment lines is some 3 MB of tree, of list values 7 MB;
// measured with those two shapes, +41 MiB two at a time, +65 MiB four at
// a time), which Limits.ParseBudget bounds. They come from a member:
// without an envelope, a document of this many tokens is refused before
// it is parsed.
func TestQueryCacheHeavyDocuments(t *testing.T) {
	t.Parallel()
	srv, c := startMemberAttackTarget(t, alice)
	pid := srv.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idle := settledRSS(ctx, pid)
	peak := samplePeak(pid)
	const n = 1000
	for i := range n {
		shape := heavyShapes[i%len(heavyShapes)]
		req := shape.request(i, server.DefaultMaxQuery)
		if len(req.Query) != server.DefaultMaxQuery {
			t.Errorf("%s #%d: %d bytes, want %d", shape.name, i, len(req.Query), server.DefaultMaxQuery)
			break
		}
		var data struct {
			Typename string `json:"__typename"`
		}
		res, err := c.Raw(ctx, req)
		if err == nil {
			err = res.Err()
		}
		if err == nil {
			err = json.Unmarshal(res.Data, &data)
		}
		if err != nil || data.Typename != "Query" {
			t.Errorf("%s #%d: %v, data %.100s", shape.name, i, err, res.Data)
			break
		}
	}
	top := peak.Stop()
	if t.Failed() {
		return
	}
	after := settledRSS(ctx, pid)
	t.Logf("query cache, heavy documents: idle RSS %.1f MiB, settled after %d documents %.1f MiB (+%.1f MiB), peak %.1f MiB",
		mib(idle), n, mib(after), mib(after-idle), mib(top))
	if after-idle >= 64<<20 {
		t.Errorf("RSS grew by %.1f MiB after %d heavy documents of %d bytes: over 64 MiB", mib(after-idle), n, server.DefaultMaxQuery)
	}
}

// heavyShape fills a document of a given size: request(i, size) is a
// valid request for exactly size bytes of document, distinct for each i,
// whose selected operation answers {"__typename": "Query"}.
type heavyShape struct {
	name    string
	request func(i, size int) gqlclient.Request
}

var heavyShapes = []heavyShape{
	// Each comment is kept in the tree, attached to the next node.
	{"comment lines", func(i, size int) gqlclient.Request {
		return gqlclient.Request{Query: fillQuery(fmt.Sprintf("query Q%d { __typename\n", i), "#\n", "}", size)}
	}},
	// A list literal of 2-byte IDs as a variable's default, in an
	// operation that is validated and cached with the document but never
	// run (operationName picks the other).
	{"list values", func(i, size int) gqlclient.Request {
		return gqlclient.Request{
			Query: fillQuery(fmt.Sprintf("query Q%d { __typename } mutation M($d: [ID!] = [", i), "1 ",
				`]) { submitMessage(input: {conversationId: "c", text: "t", idempotencyKey: "k", documentIds: $d}) { id } }`, size),
			OperationName: fmt.Sprintf("Q%d", i),
		}
	}},
	// 401 fields, within MaxFields and the complexity limit, then a
	// comment: light enough to be cached, so the cache fills and evicts.
	{"aliases and a comment", func(i, size int) gqlclient.Request {
		var b strings.Builder
		fmt.Fprintf(&b, "query Q%d { __typename", i)
		for a := range 400 {
			fmt.Fprintf(&b, " a%d: __typename", a)
		}
		return gqlclient.Request{Query: fillQuery(b.String()+" } #", "x", "", size)}
	}},
}

// fillQuery is head, fill repeated while it fits, and tail, padded with
// spaces to exactly size bytes.
func fillQuery(head, fill, tail string, size int) string {
	reps := (size - len(head) - len(tail)) / len(fill)
	q := head + strings.Repeat(fill, reps) + tail
	return q + strings.Repeat(" ", size-len(q))
}

// TestQueryDepthLimit: a selection nested deeper than MaxDepth is
// GRAPHQL_VALIDATION_FAILED, written out or through a fragment, while one
// exactly MaxDepth deep and GraphiQL's own introspection query run.
// gqlparser's MaxIntrospectionDepth counts only list fields, so ofType
// chains pass it: only QueryShape stops them.
func TestQueryDepthLimit(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := h.Client(t, alice)

	// ofTypes(k) nests k ofType fields; under __type and above name the
	// selection is k+2 fields deep.
	ofTypes := func(k int) string {
		return strings.Repeat("ofType { ", k) + "name" + strings.Repeat(" }", k)
	}
	deep := func(depth int) string { return `{ __type(name: "Query") { ` + ofTypes(depth-2) + ` } }` }
	viaFragment := func(depth int) string {
		return `{ __type(name: "Query") { ...Chain } } fragment Chain on __Type { ` + ofTypes(depth-2) + ` }`
	}
	tests := []struct {
		name  string
		query string
		code  string // "" when it runs
	}{
		{"MaxDepth deep", deep(server.DefaultMaxDepth), ""},
		{"MaxDepth deep through a fragment", viaFragment(server.DefaultMaxDepth), ""},
		{"MaxDepth+1 deep", deep(server.DefaultMaxDepth + 1), "GRAPHQL_VALIDATION_FAILED"},
		{"MaxDepth+1 deep through a fragment", viaFragment(server.DefaultMaxDepth + 1), "GRAPHQL_VALIDATION_FAILED"},
		{"20 deep", deep(20), "GRAPHQL_VALIDATION_FAILED"},
		{"GraphiQL introspection", graphiQLIntrospection, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Raw(ctx, gqlclient.Request{Query: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			if tt.code != "" {
				checkCoded(t, res.Errors, tt.code)
				return
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}

	// The introspection result is a whole schema.
	res, err := a.Raw(ctx, gqlclient.Request{Query: graphiQLIntrospection, OperationName: "IntrospectionQuery"})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Schema struct {
			QueryType struct{ Name string } `json:"queryType"`
			Types     []struct{ Name string }
		} `json:"__schema"`
	}
	if err := json.Unmarshal(res.Data, &schema); err != nil || schema.Schema.QueryType.Name != "Query" || len(schema.Schema.Types) < 10 {
		t.Fatalf("introspection: %v, %d types, query type %q", err, len(schema.Schema.Types), schema.Schema.QueryType.Name)
	}
}

// TestIntrospectionDisabled: with NoIntrospection, __schema and __type are
// GRAPHQL_VALIDATION_FAILED, GraphiQL's query included; __typename is not
// introspection and still answers.
func TestIntrospectionDisabled(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true
		c.Limits.NoIntrospection = true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	for _, tt := range []struct{ name, query string }{
		{"__schema", `{ __schema { queryType { name } } }`},
		{"__type", `{ __type(name: "Member") { name } }`},
		{"__schema in a fragment", `{ me { id } ...F } fragment F on Query { __schema { types { name } } }`},
		{"GraphiQL introspection", graphiQLIntrospection},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Raw(ctx, gqlclient.Request{Query: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			checkCoded(t, res.Errors, "GRAPHQL_VALIDATION_FAILED")
			if len(res.Data) > 0 && string(res.Data) != "null" {
				t.Fatalf("refused, yet data = %s", res.Data)
			}
		})
	}
	var out struct {
		Typename string `json:"__typename"`
		Me       struct {
			Typename string `json:"__typename"`
		} `json:"me"`
	}
	if err := a.Do(ctx, `{ __typename me { __typename } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	if out.Typename != "Query" || out.Me.Typename != "Member" {
		t.Fatalf("__typename = %+v", out)
	}
}

// TestSuggestions: a misspelled field's validation error says "Did you
// mean" in dev mode, and not in production mode (a platform key) unless
// Limits.Suggestions turns it on; Suggestions=false turns it off in dev
// mode. Field names are the schema, which introspection may withhold.
func TestSuggestions(t *testing.T) {
	t.Parallel()
	on, off := true, false
	tests := []struct {
		name        string
		production  bool
		suggestions *bool
		want        bool
	}{
		{"dev default", false, nil, true},
		{"dev, Suggestions=false", false, &off, false},
		{"production default", true, nil, false},
		{"production, Suggestions=true", true, &on, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var platform *authority.Signer
			h := servertest.New(t, func(c *server.Config) {
				c.NoRunner = true
				c.Limits.Suggestions = tt.suggestions
				if tt.production {
					c.Demo = false
					c.EnvelopeKeyFile, platform = platformKey(t, c.EnvelopeIssuer, c.EnvelopeAud)
				}
			})
			if h.Config.Dev() == tt.production {
				t.Fatalf("Dev() = %v", h.Config.Dev())
			}
			signer := h.Signer
			if tt.production {
				signer = platform
			}
			tok, err := server.MintDev(signer, alice, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			a := h.ClientWithToken(tok)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The envelope is accepted: only the misspelling is refused.
			if err := a.Do(ctx, `{ me { email } }`, nil, nil); err != nil {
				t.Fatal(err)
			}
			res, err := a.Raw(ctx, gqlclient.Request{Query: `{ me { emial } }`})
			if err != nil {
				t.Fatal(err)
			}
			checkCoded(t, res.Errors, "GRAPHQL_VALIDATION_FAILED")
			msg := res.Errors[0].Message
			if !strings.Contains(msg, `"emial"`) {
				t.Fatalf("message %q does not name the field", msg)
			}
			if got := strings.Contains(msg, "Did you mean"); got != tt.want {
				t.Fatalf("message %q: suggestion %v, want %v", msg, got, tt.want)
			}
		})
	}
}

// platformKey writes a new platform public key for production mode and
// returns its file and a signer holding the private half.
func platformKey(t *testing.T, iss, aud string) (string, *authority.Signer) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := authority.MarshalPublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "platform.pem")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, authority.NewSigner(iss, aud, priv)
}

// settledRSS polls a process's RSS until three samples 100ms apart lie
// within 1 MiB of each other and returns the last; after five seconds (or
// at ctx's end) it returns the last sample as it is, an upper bound while
// the runtime is still handing memory back.
func settledRSS(ctx context.Context, pid int) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last []int64
	for {
		last = append(last, processRSS(pid))
		if k := len(last); k >= 3 && max(last[k-1], last[k-2], last[k-3])-min(last[k-1], last[k-2], last[k-3]) < 1<<20 {
			return last[k-1]
		}
		select {
		case <-ctx.Done():
			return last[len(last)-1]
		case <-tick.C:
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// graphiQLIntrospection is the query GraphiQL sends to read the schema:
// graphql-js 16's getIntrospectionQuery() with its default options
// (typeDepth 9), as the bundled explorer (web/graphiql) calls it.
const graphiQLIntrospection = `
    query IntrospectionQuery {
      __schema {
        queryType { name kind }
        mutationType { name kind }
        subscriptionType { name kind }
        types {
          ...FullType
        }
        directives {
          name
          description
          locations
          args {
            ...InputValue
          }
        }
      }
    }

    fragment FullType on __Type {
      kind
      name
      description
      fields(includeDeprecated: true) {
        name
        description
        args {
          ...InputValue
        }
        type {
          ...TypeRef
        }
        isDeprecated
        deprecationReason
      }
      inputFields {
        ...InputValue
      }
      interfaces {
        ...TypeRef
      }
      enumValues(includeDeprecated: true) {
        name
        description
        isDeprecated
        deprecationReason
      }
      possibleTypes {
        ...TypeRef
      }
    }

    fragment InputValue on __InputValue {
      name
      description
      type { ...TypeRef }
      defaultValue
    }

    fragment TypeRef on __Type {
      kind
      name
      ofType {
        name
        kind
        ofType {
          name
          kind
          ofType {
            name
            kind
            ofType {
              name
              kind
              ofType {
                name
                kind
                ofType {
                  name
                  kind
                  ofType {
                    name
                    kind
                    ofType {
                      name
                      kind
                      ofType {
                        name
                        kind
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  `
