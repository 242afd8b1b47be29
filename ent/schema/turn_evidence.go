package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// TurnEvidence is one document a turn's text may derive from: a document
// its tools returned, one selected as its input, or one its history, its
// room summary, a history search hit or an input artifact drew on (the
// evidence of the turns they came from, transitively). It is written,
// fenced by the run's lease, before anything derived from it is
// journaled. A viewer who may not read every document of a turn's
// evidence now reads that turn as withheld (feed/), and a model context
// holds a turn only when every current member of its room may read all
// of its evidence. No foreign key to documents: a document deleted since
// stays evidence, and no one may read it.
type TurnEvidence struct{ ent.Schema }

func (TurnEvidence) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (TurnEvidence) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Immutable(),
		field.UUID("document_id", uuid.UUID{}).Immutable(),
	}
}

func (TurnEvidence) Annotations() []schema.Annotation {
	// Its foreign key to turns pairs the rooms, (conversation_id,
	// turn_id), which an ent edge cannot say: a hand-written migration
	// adds it (migrations/gen.go keeps it).
	return []schema.Annotation{entsql.Annotation{Table: "turn_evidence"}}
}

func (TurnEvidence) Indexes() []ent.Index {
	return []ent.Index{
		// The room first: every unique key of a room's rows includes it
		// (docs/scaling.md; migrations/citus_test.go). A document is a
		// turn's evidence once, however often its tools return it.
		index.Fields("conversation_id", "turn_id", "document_id").Unique(),
	}
}
