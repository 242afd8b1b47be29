package schema

import (
	"encoding/json"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// JournalEntry is one durable event of a conversation at a position (seq).
// Positions are dense per room and never reused; a subscriber resumes from
// the last position it saw.
type JournalEntry struct{ ent.Schema }

func (JournalEntry) Mixin() []ent.Mixin { return []ent.Mixin{createdMixin{}} }

func (JournalEntry) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.Int64("seq").Immutable(),
		field.String("kind").NotEmpty().Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Optional().Nillable().Immutable(),
		field.Int("attempt").Default(0).Immutable(),
		field.UUID("actor_id", uuid.UUID{}).Optional().Nillable().Immutable(),
		field.JSON("payload", json.RawMessage{}).Immutable(),
	}
}

func (JournalEntry) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{
			// The kinds are a closed set.
			"journal_entries_kind_check": "kind IN ('turn_accepted', 'turn_started', 'answer_delta', 'tool_requested', 'tool_completed', " +
				"'approval_requested', 'approval_decided', 'steer_delivered', 'steer_rejected', 'checkpoint', 'compaction', " +
				"'turn_answer', 'turn_terminal', 'member_joined', 'member_left')",
		}),
	}
}

func (JournalEntry) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).Ref("entries").Field("conversation_id").Unique().Required().Immutable(),
		edge.From("turn", Turn.Type).Ref("entries").Field("turn_id").Unique().Immutable(),
	}
}

func (JournalEntry) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("conversation_id", "seq").Unique(),
		// Exactly one terminal per turn, whatever races.
		index.Fields("conversation_id", "turn_id").Unique().
			StorageKey("journal_entry_one_terminal_per_turn").
			Annotations(entsql.IndexWhere("kind = 'turn_terminal'")),
		index.Fields("turn_id", "seq"),
	}
}
