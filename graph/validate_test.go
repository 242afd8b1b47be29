package graph

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/turn"
)

// TestSteerInputValidation: steerTurn's input is checked at the edge —
// canonical UUIDs, and 1 to turn.MaxSteerText bytes of non-blank text,
// counted in bytes, not characters.
func TestSteerInputValidation(t *testing.T) {
	const id = "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	tests := []struct {
		name  string
		in    steerInput
		field string // "" when valid
	}{
		{"valid", steerInput{CommandID: id, TurnID: id, Text: "shorter, please"}, ""},
		{"upper-case UUIDs", steerInput{CommandID: strings.ToUpper(id), TurnID: id, Text: "x"}, ""},
		{"text at the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("x", turn.MaxSteerText)}, ""},
		{"multibyte text at the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("é", turn.MaxSteerText/2)}, ""},
		{"bad command id", steerInput{CommandID: "not-a-uuid", TurnID: id, Text: "x"}, "commandId"},
		{"braced command id", steerInput{CommandID: "{" + id + "}", TurnID: id, Text: "x"}, "commandId"},
		{"empty command id", steerInput{CommandID: "", TurnID: id, Text: "x"}, "commandId"},
		{"bad turn id", steerInput{CommandID: id, TurnID: "nope", Text: "x"}, "turnId"},
		{"empty text", steerInput{CommandID: id, TurnID: id, Text: ""}, "text"},
		{"blank text", steerInput{CommandID: id, TurnID: id, Text: " \n\t"}, "text"},
		{"text over the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("x", turn.MaxSteerText+1)}, "text"},
		{"multibyte text over the limit in bytes", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("é", turn.MaxSteerText/2+1)}, "text"},
	}
	for _, tt := range tests {
		err := check(tt.in)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		e, ok := errcode.From(err)
		if !ok || e.Code != errcode.BadUserInput || e.Field != tt.field {
			t.Errorf("%s: err = %v, want BAD_USER_INPUT on %s", tt.name, err, tt.field)
		}
	}
}

// TestToUsage: a turn's usage column maps to Usage; NULL (a turn that has
// not ended) maps to null, and a column that is not a usage is an error.
func TestToUsage(t *testing.T) {
	raw, err := json.Marshal(outcome.Usage{InputTokens: 120, OutputTokens: 34, ModelCalls: 2, ToolCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := toUsage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.Usage{InputTokens: 120, OutputTokens: 34, ModelCalls: 2, ToolCalls: 1}); got == nil || *got != want {
		t.Fatalf("usage = %+v, want %+v", got, want)
	}
	for _, null := range []json.RawMessage{nil, json.RawMessage("null")} {
		if got, err := toUsage(null); got != nil || err != nil {
			t.Fatalf("usage of %q = %+v, %v; want nil", null, got, err)
		}
	}
	if _, err := toUsage(json.RawMessage(`"spent"`)); err == nil {
		t.Fatal("a usage that is not an object decoded")
	}
}

// TestSubmitInputValidation: submitMessage's optional routing and
// manifest are checked at the edge — a specialist is 1 to 64 characters
// of a-z 0-9 _ -, or empty, which is none (genqlient sends "" for an
// unset optional string); document and artifact ids are UUIDs, at most
// 20 each.
func TestSubmitInputValidation(t *testing.T) {
	const id = "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	base := func() model.SubmitMessageInput {
		return model.SubmitMessageInput{ConversationID: "room", Text: "hi", IdempotencyKey: "k-1"}
	}
	str := func(s string) *string { return &s }
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id
		}
		return out
	}
	tests := []struct {
		name  string
		edit  func(*model.SubmitMessageInput)
		field string // "" when valid
	}{
		{"no routing, no manifest", func(*model.SubmitMessageInput) {}, ""},
		{"specialist", func(in *model.SubmitMessageInput) { in.Specialist = str("research_2-b") }, ""},
		{"specialist at the limit", func(in *model.SubmitMessageInput) { in.Specialist = str(strings.Repeat("a", 64)) }, ""},
		{"20 documents and artifacts", func(in *model.SubmitMessageInput) { in.DocumentIds, in.ArtifactIds = ids(20), ids(20) }, ""},
		{"empty lists", func(in *model.SubmitMessageInput) { in.DocumentIds, in.ArtifactIds = []string{}, []string{} }, ""},
		{"empty specialist, read as none", func(in *model.SubmitMessageInput) { in.Specialist = str("") }, ""},
		{"blank specialist", func(in *model.SubmitMessageInput) { in.Specialist = str(" ") }, "specialist"},
		{"specialist too long", func(in *model.SubmitMessageInput) { in.Specialist = str(strings.Repeat("a", 65)) }, "specialist"},
		{"upper-case specialist", func(in *model.SubmitMessageInput) { in.Specialist = str("Lawyer") }, "specialist"},
		{"specialist with a space", func(in *model.SubmitMessageInput) { in.Specialist = str("the lawyer") }, "specialist"},
		{"21 documents", func(in *model.SubmitMessageInput) { in.DocumentIds = ids(21) }, "documentIds"},
		{"21 artifacts", func(in *model.SubmitMessageInput) { in.ArtifactIds = ids(21) }, "artifactIds"},
		{"bad document id", func(in *model.SubmitMessageInput) { in.DocumentIds = []string{id, "doc-1"} }, "documentIds[1]"},
		{"bad artifact id", func(in *model.SubmitMessageInput) { in.ArtifactIds = []string{"not-a-uuid"} }, "artifactIds[0]"},
	}
	for _, tt := range tests {
		in := base()
		tt.edit(&in)
		err := check(submitInputOf(in))
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		e, ok := errcode.From(err)
		if !ok || e.Code != errcode.BadUserInput || e.Field != tt.field {
			t.Errorf("%s: err = %v, want BAD_USER_INPUT on %s", tt.name, err, tt.field)
		}
	}
	if got, err := parseIDs("documentIds", []string{strings.ToUpper(id)}); err != nil || len(got) != 1 || got[0].String() != id {
		t.Fatalf("parseIDs = %v, %v", got, err)
	}
}

// TestDecideApprovalInputValidation: an approval id is a UUID and a
// decision is APPROVE or REJECT.
func TestDecideApprovalInputValidation(t *testing.T) {
	const id = "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	for _, tt := range []struct {
		in    decideApprovalInput
		field string
	}{
		{decideApprovalInput{ApprovalID: id, Decision: "APPROVE"}, ""},
		{decideApprovalInput{ApprovalID: id, Decision: "REJECT"}, ""},
		{decideApprovalInput{ApprovalID: "nope", Decision: "APPROVE"}, "approvalId"},
		{decideApprovalInput{ApprovalID: "", Decision: "APPROVE"}, "approvalId"},
		{decideApprovalInput{ApprovalID: id, Decision: "MAYBE"}, "decision"},
	} {
		err := check(tt.in)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tt.in, err)
			}
			continue
		}
		if e, ok := errcode.From(err); !ok || e.Code != errcode.BadUserInput || e.Field != tt.field {
			t.Errorf("%+v: err = %v, want BAD_USER_INPUT on %s", tt.in, err, tt.field)
		}
	}
	for d, want := range map[model.ApprovalDecision]string{model.ApprovalDecisionApprove: turn.DecisionApprove, model.ApprovalDecisionReject: turn.DecisionReject} {
		if decisions[d] != want {
			t.Errorf("decision %s maps to %q, want %q", d, decisions[d], want)
		}
	}
}

// TestApprovalView: an approval's arguments are shown redacted as the
// journal shows them, still JSON; a pending approval past its expiry is
// EXPIRED.
func TestApprovalView(t *testing.T) {
	now := time.Now()
	a := toApproval(&turn.ApprovalState{
		ID: uuid.New(), TurnID: uuid.New(), Tool: "send_webhook", State: "pending", ExpiresAt: now.Add(time.Minute),
		Arguments: json.RawMessage(`{"endpoint":"ops","payload":{"to":["carol@example.com"],"n":2,"deploy":"v2"}}`),
	})
	if a.State != model.ApprovalStatePending {
		t.Fatalf("state %s, want PENDING", a.State)
	}
	var args struct {
		Endpoint string
		Payload  struct {
			To     []string
			N      int
			Deploy string
		}
	}
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		t.Fatalf("arguments %s: %v", a.Arguments, err)
	}
	if args.Endpoint != "ops" || args.Payload.N != 2 || args.Payload.Deploy != "v2" || len(args.Payload.To) != 1 || args.Payload.To[0] != "[redacted:email]" {
		t.Fatalf("arguments %s", a.Arguments)
	}
	for state, want := range map[string]model.ApprovalState{
		"pending": model.ApprovalStateExpired, "approved": model.ApprovalStateApproved,
		"rejected": model.ApprovalStateRejected, "expired": model.ApprovalStateExpired,
	} {
		if got := approvalState(state, now.Add(-time.Second), now); got != want {
			t.Errorf("%s past its expiry = %s, want %s", state, got, want)
		}
	}
}

// TestAnswerViews: an answer's citations and artifacts map to the
// contract; a citation without a document or digest has nulls, an
// artifact without a room resource has no resourceId, and every artifact
// downloads from its /artifacts path.
func TestAnswerViews(t *testing.T) {
	doc, art, res := uuid.New(), uuid.New(), uuid.New()
	cs := toCitations("turn", []journal.AnswerCitation{
		{ID: "doc:1", Document: doc, Source: "Launch plan", Passage: "Friday", Digest: "ab"},
		{ID: "msg:2", Source: "history", Passage: "earlier"},
	})
	if c := cs[0]; c.DocumentID == nil || *c.DocumentID != doc.String() || c.Digest == nil || *c.Digest != "ab" || c.Source != "Launch plan" {
		t.Fatalf("citation %+v", c)
	}
	if c := cs[1]; c.DocumentID != nil || c.Digest != nil {
		t.Fatalf("citation without lineage %+v", c)
	}
	as := toAnswerArtifacts("turn", []journal.AnswerArtifact{
		{ArtifactID: art, ResourceID: res, Name: "a.csv", MediaType: "text/csv", Size: 3, SHA256: "cd"},
		{ArtifactID: art, Name: "a.csv", MediaType: "text/csv", Size: 3, SHA256: "cd"},
	})
	if a := as[0]; a.ResourceID == nil || *a.ResourceID != res.String() || a.DownloadURL != "/artifacts/"+art.String() || a.Sha256 != "cd" || a.Size != 3 {
		t.Fatalf("artifact %+v", a)
	}
	if as[1].ResourceID != nil {
		t.Fatalf("private artifact %+v has a resource", as[1])
	}
	if got := toCitations("turn", nil); got == nil || len(got) != 0 {
		t.Fatalf("no citations = %#v, want an empty list", got)
	}
}
