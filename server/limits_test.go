package server_test

import (
	"context"
	"encoding/json"
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
				servertest.CheckCoded(t, res.Errors, tt.code)
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
			servertest.CheckCoded(t, res.Errors, "GRAPHQL_VALIDATION_FAILED")
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
					c.EnvelopeKeyFile, platform = servertest.PlatformKey(t, c.EnvelopeIssuer, c.EnvelopeAud)
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
			servertest.CheckCoded(t, res.Errors, "GRAPHQL_VALIDATION_FAILED")
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
