package graph

import (
	"os"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// loadSchema parses the public contract as clients see it.
func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	src, err := os.ReadFile("../schema.graphql")
	if err != nil {
		t.Fatal(err)
	}
	s, gerr := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphql", Input: string(src)})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return s
}

// TestSchemaIsDescribed: the schema is the documentation typed clients
// show in editors, so every type, field, argument, enum value and input
// field of the contract carries a description.
func TestSchemaIsDescribed(t *testing.T) {
	var missing []string
	for name, def := range loadSchema(t).Types {
		if def.BuiltIn || strings.HasPrefix(name, "__") {
			continue
		}
		if strings.TrimSpace(def.Description) == "" {
			missing = append(missing, "type "+name)
		}
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			if strings.TrimSpace(f.Description) == "" {
				missing = append(missing, name+"."+f.Name)
			}
			for _, a := range f.Arguments {
				if strings.TrimSpace(a.Description) == "" {
					missing = append(missing, name+"."+f.Name+"("+a.Name+")")
				}
			}
		}
		for _, v := range def.EnumValues {
			if strings.TrimSpace(v.Description) == "" {
				missing = append(missing, name+"."+v.Name)
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d schema elements have no description: %s", len(missing), strings.Join(missing, ", "))
	}
}

// TestCustomScalarsAreSpecified: every custom scalar names its
// specification, so generators can map it without guessing.
func TestCustomScalarsAreSpecified(t *testing.T) {
	for name, def := range loadSchema(t).Types {
		if def.Kind != ast.Scalar || def.BuiltIn {
			continue
		}
		d := def.Directives.ForName("specifiedBy")
		if d == nil || d.Arguments.ForName("url") == nil || !strings.HasPrefix(d.Arguments.ForName("url").Value.Raw, "https://") {
			t.Errorf("scalar %s has no @specifiedBy(url:)", name)
		}
	}
}

// TestEveryEntityHasAnID: a normalized client cache (Apollo, urql
// graphcache) keys objects by typename and id, so every object a client
// can meet twice carries one. The types listed are values: pages,
// records embedded in one entry, results of one mutation.
func TestEveryEntityHasAnID(t *testing.T) {
	values := map[string]bool{
		"Query": true, "Mutation": true, "Subscription": true,
		"ConversationConnection": true, "ConversationEdge": true, "DocumentConnection": true, "DocumentEdge": true,
		"PageInfo": true, "JournalPage": true, "Usage": true, "SteerResult": true, "TurnTerminal": true,
		"TurnAccepted": true, "TurnStart": true, "ToolActivity": true, "ApprovalRequest": true,
		"ApprovalDecisionRecord": true, "SteerRecord": true, "CheckpointRecord": true, "CompactionRecord": true,
		"TurnAnswer": true, "MembershipChange": true, "AdminDocumentConnection": true, "AdminMemberConnection": true, "AdminEventConnection": true,
		"ModelMessage": true, "ModelToolCall": true,
		"ToolRequested": true, "ToolCompleted": true, "SteerDelivered": true, "SteerRejected": true,
		"MemberJoined": true, "MemberLeft": true,
	}
	for name, def := range loadSchema(t).Types {
		if def.Kind != ast.Object || def.BuiltIn || strings.HasPrefix(name, "__") || values[name] {
			continue
		}
		if f := def.Fields.ForName("id"); f == nil || f.Type.Name() != "ID" || !f.Type.NonNull {
			t.Errorf("object %s has no id: ID!", name)
		}
	}
}

// TestJournalPayloadSelectsAsOne: no two members of JournalPayload have
// a field of the same name with another type, so one selection may ask
// for every member's fields without aliases (GraphQL refuses fields of
// one response name and two shapes, even on different members).
func TestJournalPayloadSelectsAsOne(t *testing.T) {
	s := loadSchema(t)
	u := s.Types["JournalPayload"]
	if u == nil || u.Kind != ast.Union {
		t.Fatal("JournalPayload is not a union")
	}
	seen := map[string]string{} // field → "Member: type"
	for _, m := range u.Types {
		for _, f := range s.Types[m].Fields {
			typ := f.Type.String()
			if prev, ok := seen[f.Name]; ok && !strings.HasSuffix(prev, ": "+typ) {
				t.Errorf("%s.%s is %s, but %s.%s is not", m, f.Name, typ, strings.Split(prev, ":")[0], f.Name)
			}
			seen[f.Name] = m + ": " + typ
		}
	}
	if len(u.Types) != len(s.Types["JournalKind"].EnumValues) {
		t.Fatalf("%d payload types for %d kinds", len(u.Types), len(s.Types["JournalKind"].EnumValues))
	}
}
