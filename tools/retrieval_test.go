package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/tools"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// Retrieval and read_document never show a document outside the member's
// ACL or the turn's manifest: a table of members × documents, each cell
// read both ways.
func TestRetrievalRespectsACLAndManifest(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	add := func(title string, readers ...string) uuid.UUID {
		id, err := resource.AddDocument(ctx, env.Client, resource.Document{Title: title, Body: title + " mentions the zebra crossing.", Readers: readers})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	shared := add("Shared", "ann@example.com", "ben@example.com")
	annOnly := add("Ann only", "ann@example.com")
	nobody := add("Nobody's")
	var cutoff time.Time
	if err := env.DB.QueryRow(`SELECT now()`).Scan(&cutoff); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.QueryRow(`SELECT now() FROM pg_sleep(0.01)`).Scan(new(time.Time)); err != nil {
		t.Fatal(err)
	}
	later := add("Written later", "ann@example.com")

	before := &cutoff
	for _, tc := range []struct {
		name    string
		actor   tools.Actor
		visible []uuid.UUID
	}{
		{"ann, documents that existed", tools.Actor{Email: "ann@example.com", Manifest: authority.Manifest{DocumentsBefore: before}}, []uuid.UUID{shared, annOnly}},
		{"ann, no cut-off", tools.Actor{Email: "ANN@example.com"}, []uuid.UUID{shared, annOnly, later}},
		{"ann, selected one", tools.Actor{Email: "ann@example.com", Manifest: authority.Manifest{Documents: []uuid.UUID{annOnly, nobody}}}, []uuid.UUID{annOnly}},
		{"ben", tools.Actor{Email: "ben@example.com", Manifest: authority.Manifest{DocumentsBefore: before}}, []uuid.UUID{shared}},
		{"ben selecting ann's", tools.Actor{Email: "ben@example.com", Manifest: authority.Manifest{Documents: []uuid.UUID{annOnly}}}, nil},
		{"a stranger", tools.Actor{Email: "eve@example.com"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tools.Retrieval{}.Run(ctx, tools.Call{Actor: tc.actor, DB: env.DB, Arguments: json.RawMessage(`{"query":"zebra","limit":10}`)})
			if err != nil {
				t.Fatal(err)
			}
			var got []uuid.UUID
			for _, c := range res.Citations {
				if !slices.Contains(got, c.Document) {
					got = append(got, c.Document)
				}
				if c.Digest == "" || !strings.HasPrefix(c.ID, "doc:"+c.Document.String()+"#p") {
					t.Errorf("citation %+v lacks its id or digest", c)
				}
			}
			slices.SortFunc(got, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
			want := slices.Clone(tc.visible)
			slices.SortFunc(want, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
			if !slices.Equal(got, want) {
				t.Errorf("retrieval found %v, want %v", got, want)
			}
			for _, doc := range []uuid.UUID{shared, annOnly, nobody, later} {
				res, err := tools.ReadDocument{}.Run(ctx, tools.Call{Actor: tc.actor, DB: env.DB, Arguments: json.RawMessage(`{"id":"doc:` + doc.String() + `"}`)})
				var refusal *tools.Refusal
				switch {
				case slices.Contains(tc.visible, doc):
					if err != nil || !strings.Contains(res.Content, "zebra") {
						t.Errorf("read_document %s = %v, want its text", doc, err)
					}
				case !errors.As(err, &refusal) || refusal.Status != "not_found" || res.Content != "":
					t.Errorf("read_document %s = %q, %v; want a not_found refusal and nothing of it", doc, res.Content, err)
				}
			}
		})
	}
}
