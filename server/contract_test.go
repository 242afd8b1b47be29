package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// typedJournal asks for every typed field of a journal entry.
const typedJournal = `query($c: ID!) { journal(conversationId: $c, first: 500) { entries {
  id seq kind turnId text
  accepted { authorId authorName }
  started { attempt agentVersion recovered }
  delta { id turnId seq attempt offset text }
  tool { callId name arguments status bytes citations }
  answer { text citations { id ref documentId source } artifacts { id artifactId } }
  terminal { outcome reason }
} } }`

type typedEntry struct {
	ID       string  `json:"id"`
	Seq      int64   `json:"seq"`
	Kind     string  `json:"kind"`
	TurnID   *string `json:"turnId"`
	Text     *string `json:"text"`
	Accepted *struct {
		AuthorID   string `json:"authorId"`
		AuthorName string `json:"authorName"`
	} `json:"accepted"`
	Started *struct {
		Attempt int `json:"attempt"`
	} `json:"started"`
	Delta *struct {
		ID     string `json:"id"`
		Offset int    `json:"offset"`
		Text   string `json:"text"`
	} `json:"delta"`
	Tool *struct {
		CallID    string          `json:"callId"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Status    *string         `json:"status"`
	} `json:"tool"`
	Answer *struct {
		Text      string `json:"text"`
		Citations []struct {
			ID, Ref, Source string
		} `json:"citations"`
	} `json:"answer"`
	Terminal *struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	} `json:"terminal"`
}

// TestJournalEntriesAreTyped: each entry kind carries its meaning in its
// own typed field — who sent the message, the run, the delta's text and
// offset, the tool's name, arguments (a JSON value) and status, the
// answer with its citations, the terminal's outcome and reason as enums —
// and every entry, delta and citation has an id unique across turns, so
// a normalized client cache never merges two of them.
func TestJournalEntriesAreTyped(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	first := servertest.SubmitAs(t, ctx, a, team, "When is the launch?", "typed-1")
	servertest.AwaitTurnEnd(t, ctx, a, first)
	second := servertest.SubmitAs(t, ctx, a, team, "When is the launch, again?", "typed-2")
	servertest.AwaitTurnEnd(t, ctx, a, second)

	var page struct {
		Journal struct{ Entries []typedEntry } `json:"journal"`
	}
	if err := a.Do(ctx, typedJournal, map[string]any{"c": team}, &page); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	citationIDs := map[string]string{}
	kinds := map[string]int{}
	for _, e := range page.Journal.Entries {
		if ids[e.ID] {
			t.Fatalf("entry id %s repeats", e.ID)
		}
		ids[e.ID] = true
		if e.TurnID == nil || (*e.TurnID != first && *e.TurnID != second) {
			continue
		}
		kinds[e.Kind]++
		switch e.Kind {
		case "TURN_ACCEPTED":
			if e.Accepted == nil || e.Accepted.AuthorName == "" || e.Accepted.AuthorID == "" {
				t.Fatalf("accepted entry %+v has no author", e)
			}
		case "TURN_STARTED":
			if e.Started == nil || e.Started.Attempt != 1 {
				t.Fatalf("started entry %+v", e)
			}
		case "ANSWER_DELTA":
			if e.Delta == nil || e.Delta.ID != e.ID || e.Text == nil || e.Delta.Text != *e.Text {
				t.Fatalf("delta entry %+v", e)
			}
		case "TOOL_REQUESTED":
			if e.Tool == nil || e.Tool.Name == "" || e.Tool.Status != nil || !json.Valid(e.Tool.Arguments) || e.Tool.Arguments[0] != '{' {
				t.Fatalf("tool request %+v: want a name and JSON object arguments", e.Tool)
			}
		case "TOOL_COMPLETED":
			if e.Tool == nil || e.Tool.Status == nil || *e.Tool.Status != "ok" {
				t.Fatalf("tool completion %+v", e.Tool)
			}
		case "TURN_ANSWER":
			if e.Answer == nil || e.Answer.Text == "" || len(e.Answer.Citations) == 0 {
				t.Fatalf("answer entry %+v has no cited answer", e)
			}
			for _, c := range e.Answer.Citations {
				if !strings.HasPrefix(c.ID, *e.TurnID+"/") || !strings.Contains(e.Answer.Text, "["+c.Ref+"]") {
					t.Fatalf("citation %+v of turn %s", c, *e.TurnID)
				}
				if other, dup := citationIDs[c.ID]; dup {
					t.Fatalf("citation id %s of turn %s repeats that of turn %s", c.ID, *e.TurnID, other)
				}
				citationIDs[c.ID] = *e.TurnID
			}
		case "TURN_TERMINAL":
			if e.Terminal == nil || e.Terminal.Outcome != "COMPLETED" || e.Terminal.Reason != "COMPLETED" {
				t.Fatalf("terminal entry %+v", e.Terminal)
			}
		}
		if e.Kind != "TOOL_REQUESTED" && e.Kind != "TOOL_COMPLETED" && e.Tool != nil {
			t.Fatalf("a %s entry carries a tool", e.Kind)
		}
	}
	for _, k := range []string{"TURN_ACCEPTED", "TURN_STARTED", "ANSWER_DELTA", "TOOL_REQUESTED", "TOOL_COMPLETED", "TURN_ANSWER", "TURN_TERMINAL"} {
		if kinds[k] < 2 {
			t.Fatalf("kinds seen %v: want at least one %s per turn", kinds, k)
		}
	}
	refs := map[string]bool{}
	for id := range citationIDs {
		_, ref, _ := strings.Cut(id, "/")
		refs[ref] = true
	}
	if len(refs) == len(citationIDs) {
		t.Fatalf("the two turns cited nothing in common (%v): the test proves nothing", citationIDs)
	}

	var turn struct {
		Turn struct {
			Terminal struct{ Outcome, Reason string }
		}
	}
	if err := a.Do(ctx, `query($id: ID!) { turn(id: $id) { terminal { outcome reason } } }`, map[string]any{"id": first}, &turn); err != nil {
		t.Fatal(err)
	}
	if turn.Turn.Terminal.Outcome != "COMPLETED" || turn.Turn.Terminal.Reason != "COMPLETED" {
		t.Fatalf("turn terminal %+v", turn.Turn.Terminal)
	}
}

// TestDocumentsPage: documentsConnection pages through every document the
// caller may read, in order, without a repeat or a gap, with Relay's
// page info; a cursor it did not make is BAD_USER_INPUT.
func TestDocumentsPage(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	const q = `query($first: Int, $after: String) { documentsConnection(first: $first, after: $after) {
  edges { cursor node { id title } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`
	type page struct {
		DocumentsConnection struct {
			Edges []struct {
				Cursor string
				Node   struct{ ID, Title string }
			}
			PageInfo struct {
				HasNextPage, HasPreviousPage bool
				StartCursor, EndCursor       *string
			}
		}
	}
	var all page
	if err := a.Do(ctx, q, map[string]any{"first": 100}, &all); err != nil {
		t.Fatal(err)
	}
	want := all.DocumentsConnection.Edges
	if len(want) < 3 || all.DocumentsConnection.PageInfo.HasNextPage || all.DocumentsConnection.PageInfo.HasPreviousPage {
		t.Fatalf("one page of everything: %d documents, %+v", len(want), all.DocumentsConnection.PageInfo)
	}
	var got []string
	var after any
	for pages := 0; ; pages++ {
		var p page
		if err := a.Do(ctx, q, map[string]any{"first": 2, "after": after}, &p); err != nil {
			t.Fatal(err)
		}
		c := p.DocumentsConnection
		if c.PageInfo.HasPreviousPage != (after != nil) {
			t.Fatalf("page %d: hasPreviousPage %v", pages, c.PageInfo.HasPreviousPage)
		}
		if len(c.Edges) > 0 && (*c.PageInfo.StartCursor != c.Edges[0].Cursor || *c.PageInfo.EndCursor != c.Edges[len(c.Edges)-1].Cursor) {
			t.Fatalf("page %d: cursors %+v", pages, c.PageInfo)
		}
		for _, e := range c.Edges {
			got = append(got, e.Node.ID)
		}
		if !c.PageInfo.HasNextPage {
			break
		}
		after = *c.PageInfo.EndCursor
	}
	if len(got) != len(want) {
		t.Fatalf("paged %d documents, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i].Node.ID {
			t.Fatalf("document %d is %s paged, %s at once", i, got[i], want[i].Node.ID)
		}
	}
	for _, bad := range []string{"x", "ZG9jczotMQ", "ZG9jczo5OTk5OQ", "Y29udjox"} {
		err := a.Do(ctx, q, map[string]any{"first": 2, "after": bad}, nil)
		if code := gqlclient.CodeOf(err); code != "BAD_USER_INPUT" {
			t.Fatalf("cursor %q: %v (%s), want BAD_USER_INPUT", bad, err, code)
		}
	}
}
