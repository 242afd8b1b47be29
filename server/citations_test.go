package server_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// citationSubmit submits with the optional routing and manifest.
const citationSubmit = `mutation($c: ID!, $t: String!, $k: String!, $s: String, $d: [ID!], $a: [ID!]) {
  submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: $k, specialist: $s, documentIds: $d, artifactIds: $a}) {
    id state citations { id } artifacts { artifactId } approvals { id }
  }
}`

// citationSubmitAs runs citationSubmit as c; nil routing and manifest
// values are sent as null.
func citationSubmitAs(ctx context.Context, c *gqlclient.Client, room, text, key string, specialist any, docs, arts []string) (*servertest.TurnAnswerView, error) {
	vars := map[string]any{"c": room, "t": text, "k": key, "s": specialist, "d": nil, "a": nil}
	if docs != nil {
		vars["d"] = docs
	}
	if arts != nil {
		vars["a"] = arts
	}
	var out struct {
		SubmitMessage *servertest.TurnAnswerView `json:"submitMessage"`
	}
	if err := c.Do(ctx, citationSubmit, vars, &out); err != nil {
		return nil, err
	}
	return out.SubmitMessage, nil
}

// citationDocuments lists the documents c may read, by title.
func citationDocuments(t *testing.T, ctx context.Context, c *gqlclient.Client) map[string]struct{ ID, Digest string } {
	t.Helper()
	var out struct {
		Documents []struct{ ID, Title, Digest string } `json:"documents"`
	}
	if err := c.Do(ctx, `{ documents(first: 100) { id title digest } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]struct{ ID, Digest string }{}
	for _, d := range out.Documents {
		m[d.Title] = struct{ ID, Digest string }{d.ID, d.Digest}
	}
	return m
}

// citationWrites counts what a submission writes: turns and journal
// entries.
func citationWrites(t *testing.T, h *servertest.Harness) (turns, entries int64) {
	t.Helper()
	if err := h.DB.QueryRow(`SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM journal_entries)`).Scan(&turns, &entries); err != nil {
		t.Fatal(err)
	}
	return turns, entries
}

// TestCitationsOfTheAnswer: through the real server, alice asks the Team
// room's default agent (the builtin model) when the launch is; it searches
// the demo documents, and the completed turn's citations carry the
// lineage of what it cited — the Launch plan document by its doc: id, the
// passage and the document's digest, as the documents query shows them.
// A turn that has not answered yet has no citations, artifacts or
// approvals; another member of the room reads the same citations; someone
// outside it sees no turn at all.
func TestCitationsOfTheAnswer(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b, m := h.Client(t, alice), h.Client(t, bob), h.Client(t, mallory)
	team := servertest.Rooms(t, a)["Team room"].ID
	launch := citationDocuments(t, ctx, a)["Launch plan"]
	if launch.ID == "" {
		t.Fatal("alice cannot list the Launch plan")
	}

	accepted, err := citationSubmitAs(ctx, a, team, "When is the launch?", "cite-1", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(accepted.Citations) != 0 || len(accepted.Artifacts) != 0 || len(accepted.Approvals) != 0 {
		t.Fatalf("the accepted turn already has %+v", accepted)
	}
	done := servertest.AwaitTurnEnd(t, ctx, a, accepted.ID)
	if done.State != "COMPLETED" || done.Answer == nil {
		t.Fatalf("turn ended %s with answer %v", done.State, done.Answer)
	}
	var cited *servertest.CitationView
	for i, c := range done.Citations {
		if strings.HasPrefix(c.ID, "doc:") && c.Source == "Launch plan" {
			cited = &done.Citations[i]
		}
	}
	if cited == nil {
		t.Fatalf("citations %+v, want the Launch plan by a doc: id", done.Citations)
	}
	if cited.DocumentID == nil || *cited.DocumentID != launch.ID {
		t.Fatalf("citation %+v names document %v, want the Launch plan %s", cited, cited.DocumentID, launch.ID)
	}
	if cited.Digest == nil || *cited.Digest != launch.Digest {
		t.Fatalf("citation %+v has digest %v, want the Launch plan's %s", cited, cited.Digest, launch.Digest)
	}
	if !strings.Contains(cited.Passage, "launch") {
		t.Fatalf("cited passage %q", cited.Passage)
	}
	if !strings.Contains(*done.Answer, "["+cited.ID+"]") {
		t.Fatalf("answer %q does not cite %s", *done.Answer, cited.ID)
	}
	if len(done.Artifacts) != 0 || len(done.Approvals) != 0 {
		t.Fatalf("a plain answer has artifacts %+v and approvals %+v", done.Artifacts, done.Approvals)
	}

	// Bob, in the room, reads the same lineage; mallory sees no turn.
	seen, err := servertest.CitationTurn(ctx, b, accepted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if seen == nil || !reflect.DeepEqual(seen.Citations, done.Citations) {
		t.Fatalf("bob reads %+v, alice %+v", seen, done.Citations)
	}
	if _, err := servertest.CitationTurn(ctx, m, accepted.ID); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Fatalf("mallory reading the turn: %v, want NOT_FOUND", err)
	}
}

// TestCitationInputsRouteAndManifest: submitMessage's one-turn specialist
// route and resource manifest, through the real server. A specialist
// outside the caller's effective roster is FORBIDDEN — one in no roster,
// or the demo's researcher for bob, whose roster is empty — while alice
// (her roster holds the researcher) is routed to it; a selected document
// the caller cannot read is NOT_FOUND, like one that does not exist;
// malformed routes and ids are BAD_USER_INPUT (an empty specialist is
// none: TestSubmitEmptySpecialistIsAbsent). Refusals write nothing. A
// turn given documents sees only those: asked about the launch with only
// the Security policy selected, it cannot cite the Launch plan.
func TestCitationInputsRouteAndManifest(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"].ID
	docs := citationDocuments(t, ctx, a)
	comp, security := docs["Compensation bands 2027"].ID, docs["Security policy"].ID
	if comp == "" || security == "" {
		t.Fatalf("alice's documents: %+v", docs)
	}
	if _, ok := citationDocuments(t, ctx, b)["Compensation bands 2027"]; ok {
		t.Fatal("bob can read the compensation bands")
	}

	refusals := []struct {
		name       string
		client     *gqlclient.Client
		specialist any
		docs, arts []string
		code       string
	}{
		{"a specialist in no roster", a, "lawyer", nil, nil, "FORBIDDEN"},
		{"a specialist outside bob's empty roster", b, "researcher", nil, nil, "FORBIDDEN"},
		{"a document bob cannot read", b, nil, []string{comp}, nil, "NOT_FOUND"},
		{"a document that does not exist", a, nil, []string{uuid.NewString()}, nil, "NOT_FOUND"},
		{"an artifact that does not exist", a, nil, nil, []string{uuid.NewString()}, "NOT_FOUND"},
		{"a bad artifact id", a, nil, nil, []string{"not-a-uuid"}, "BAD_USER_INPUT"},
		{"a bad document id", a, nil, []string{security, "doc:1"}, nil, "BAD_USER_INPUT"},
		{"a blank specialist", a, " ", nil, nil, "BAD_USER_INPUT"},
		{"a malformed specialist", a, "Researcher!", nil, nil, "BAD_USER_INPUT"},
		{"too many documents", a, nil, func() []string {
			ids := make([]string, 21)
			for i := range ids {
				ids[i] = security
			}
			return ids
		}(), nil, "BAD_USER_INPUT"},
	}
	for i, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			turns, entries := citationWrites(t, h)
			_, err := citationSubmitAs(ctx, tt.client, team, "When is the launch?", "route-refused-"+string(rune('a'+i)), tt.specialist, tt.docs, tt.arts)
			if code := gqlclient.CodeOf(err); code != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if t2, e2 := citationWrites(t, h); t2 != turns || e2 != entries {
				t.Fatalf("the refusal wrote %d turns and %d journal entries", t2-turns, e2-entries)
			}
		})
	}

	// Alice's roster holds the researcher: the turn is accepted and runs.
	routed, err := citationSubmitAs(ctx, a, team, "When is the launch?", "route-researcher", "researcher", nil, nil)
	if err != nil {
		t.Fatalf("alice routing to the researcher: %v", err)
	}
	var route string
	if err := h.DB.QueryRowContext(ctx, `SELECT COALESCE(specialist, '') FROM turns WHERE id = $1`, routed.ID).Scan(&route); err != nil {
		t.Fatal(err)
	}
	if route != "researcher" {
		t.Fatalf("the routed turn's specialist is %q", route)
	}
	if done := servertest.AwaitTurnEnd(t, ctx, a, routed.ID); done.State != "COMPLETED" {
		t.Fatalf("the routed turn ended %s", done.State)
	}

	// Bob may select a document he can read; a turn given only the
	// Security policy never cites the Launch plan.
	scoped, err := citationSubmitAs(ctx, b, team, "When is the launch?", "route-scoped", nil, []string{security}, nil)
	if err != nil {
		t.Fatalf("bob selecting a document he can read: %v", err)
	}
	done := servertest.AwaitTurnEnd(t, ctx, b, scoped.ID)
	if done.State != "COMPLETED" {
		t.Fatalf("the scoped turn ended %s", done.State)
	}
	for _, c := range done.Citations {
		if c.Source == "Launch plan" || (c.DocumentID != nil && *c.DocumentID != security) {
			t.Fatalf("a turn given only the Security policy cites %+v", c)
		}
	}
}
