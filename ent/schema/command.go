package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Command is a durable member instruction to one exact run (steer or
// cancel). Its id is chosen by the client, so retries converge on one
// stored instruction; only the fenced owner of the run delivers it.
type Command struct{ ent.Schema }

func (Command) Mixin() []ent.Mixin { return []ent.Mixin{createdMixin{}} }

func (Command) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Immutable(),
		field.Enum("kind").Values("steer", "cancel").Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Immutable(),
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("actor_id", uuid.UUID{}).Immutable(),
		field.Text("text").Default("").Immutable(),
		field.Enum("state").Values("pending", "delivered", "rejected").Default("pending"),
		field.Int64("delivered_lease_token").Optional().Nillable(),
		field.Time("delivered_at").Optional().Nillable(),
	}
}

func (Command) Indexes() []ent.Index {
	return []ent.Index{
		// A run looks for the pending commands of its turn.
		index.Fields("turn_id").
			StorageKey("command_pending_by_turn").
			Annotations(entsql.IndexWhere("state = 'pending'")),
	}
}

func (Command) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("turn", Turn.Type).Ref("commands").Field("turn_id").Unique().Required().Immutable(),
	}
}
