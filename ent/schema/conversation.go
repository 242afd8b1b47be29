package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"
)

// Conversation is a room. It is known by three server-owned names: its UUID,
// its WEB_ channel and its public key; the scope resolver maps each complete
// form to the room. next_seq is the journal head: appends bump it inside the
// appending transaction, so commit order equals position order.
type Conversation struct{ ent.Schema }

func (Conversation) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Conversation) Fields() []ent.Field {
	return []ent.Field{
		field.String("public_key").NotEmpty().Unique().Immutable(),
		field.String("channel").NotEmpty().Unique().Immutable(),
		field.String("title").Default(""),
		field.Enum("kind").Values("private", "shared").Immutable(),
		field.UUID("owner_id", uuid.UUID{}).Immutable(),
		field.UUID("agent_id", uuid.UUID{}),
		field.Int64("audience_version").Default(1),
		field.Int64("next_seq").Default(0),
		field.UUID("active_turn_id", uuid.UUID{}).Optional().Nillable(),
	}
}

func (Conversation) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("owner", Member.Type).Ref("owned_conversations").Field("owner_id").Unique().Required().Immutable(),
		edge.To("agent", Agent.Type).Field("agent_id").Unique().Required(),
		edge.To("active_turn", Turn.Type).Field("active_turn_id").Unique(),
		edge.To("members", RoomMember.Type),
		edge.To("turns", Turn.Type),
		edge.To("entries", JournalEntry.Type),
		edge.To("resources", RoomResource.Type),
		edge.To("summary", RoomSummary.Type).Unique(),
	}
}
