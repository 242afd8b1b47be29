package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/resource"
)

// Spec describes a tool to a model.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Actor is who a tool runs as: the turn's member, in the turn's room, with
// the turn's pinned resource manifest.
type Actor struct {
	MemberID       uuid.UUID
	Email          string
	ConversationID uuid.UUID
	TurnID         uuid.UUID
	Manifest       authority.Manifest
	// Shared is set in a shared room: evidence the tools read (documents,
	// history) is then only what every current member of the room may
	// read (authority.AudienceReadableSQL, AudienceSharesRoomSQL).
	Shared bool
}

// audience is the room whose members bound what the actor's tools may
// read, as a query argument: the room when shared, else NULL.
func (a Actor) audience() any {
	if a.Shared {
		return a.ConversationID
	}
	return nil
}

// Call is one tool request.
type Call struct {
	Actor     Actor
	Arguments json.RawMessage
	// DB is where the tool reads and writes, as the member.
	DB pg.Querier
	// Now is the backend's clock for the call (the sandbox's only clock).
	Now time.Time
	// IdempotencyKey identifies the one execution of an effectful call:
	// its approval's id.
	IdempotencyKey string
}

// Citation is a source a result may be cited by: its id (as the answer
// cites it, without brackets), where it comes from, the passage, and the
// digest of the source it was read from.
type Citation struct {
	ID       string    `json:"id"`
	Source   string    `json:"source"`
	Passage  string    `json:"passage"`
	Document uuid.UUID `json:"document,omitempty"`
	Digest   string    `json:"digest,omitempty"`
}

// Result is what a tool found, before the backend bounds it.
type Result struct {
	// Content is what the model reads.
	Content   string     `json:"content"`
	Citations []Citation `json:"citations,omitempty"`
	// Artifacts are the artifacts the tool made, the member's own; in a
	// shared room the backend links each to the room when the tool settles.
	Artifacts []resource.ArtifactRef `json:"artifacts,omitempty"`
	// Documents are every document Content derives from: those it
	// returns, and the evidence of the turns or files it returns text of.
	// The backend records them as the turn's evidence before the model
	// reads the result; a tool that returns document content and leaves
	// them out lets that content reach viewers who may not read it.
	Documents []uuid.UUID `json:"documents,omitempty"`
}

// derivesFrom adds documents, given as text ids, to what the result
// derives from, each once.
func (r *Result) derivesFrom(ids []string) error {
	for _, s := range ids {
		id, err := uuid.Parse(s)
		if err != nil {
			return fmt.Errorf("evidence id %q: %w", s, err)
		}
		r.addDocument(id)
	}
	return nil
}

// addDocument adds one document to what the result derives from, once.
func (r *Result) addDocument(id uuid.UUID) {
	if id != uuid.Nil && !slices.Contains(r.Documents, id) {
		r.Documents = append(r.Documents, id)
	}
}

// Tool is one executable tool.
type Tool interface {
	Spec() Spec
	// Permission is what the member must hold, at the moment of the call,
	// to run it; empty when membership of the room is enough.
	Permission() string
	Run(ctx context.Context, call Call) (Result, error)
}

// ErrBadArguments reports arguments a tool cannot use; the model is told.
var ErrBadArguments = errors.New("bad tool arguments")

// Refusal is a tool declining a call for a reason the model is told
// about: the status is journaled, the message is what the model reads.
type Refusal struct {
	Status  string
	Message string
}

func (r *Refusal) Error() string { return r.Status + ": " + r.Message }

// Registry is the set of tools a backend offers, by name.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry returns a registry of the given tools.
func NewRegistry(ts ...Tool) *Registry {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range ts {
		r.tools[t.Spec().Name] = t
	}
	return r
}

// Default is the registry of the tools turngate ships. Its run_code has
// no sandbox pool and fails every call until a server replaces it with
// With(RunCode{Sandbox: pool}).
func Default() *Registry {
	return NewRegistry(HistorySearch{}, Retrieval{}, ReadDocument{}, RunCode{}, CreateArtifactTool{},
		CreateTask{}, ListTasks{}, UpdateTask{}, SendWebhook{}, Delegate{})
}

// With returns a copy of the registry with t added, or replacing the tool
// of the same name.
func (r *Registry) With(t Tool) *Registry {
	out := &Registry{tools: make(map[string]Tool, len(r.tools)+1)}
	for n, x := range r.tools {
		out.tools[n] = x
	}
	out.tools[t.Spec().Name] = t
	return out
}

// Names lists the registry's tool names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.tools))
	for n := range r.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Names lists the tools turngate ships: what an agent version may name.
func Names() []string { return Default().Names() }

// Get returns a tool by name.
func (r *Registry) Get(name string) (Tool, bool) {
	if r == nil {
		return nil, false
	}
	t, ok := r.tools[name]
	return t, ok
}

// Specs returns the specs of the named tools the registry has, sorted by
// name; names it lacks are left out.
func (r *Registry) Specs(names []string) []Spec {
	var out []Spec
	for _, n := range names {
		if t, ok := r.Get(n); ok {
			out = append(out, t.Spec())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArguments, err)
	}
	return nil
}
