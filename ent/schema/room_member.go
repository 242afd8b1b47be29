package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// RoomMember says a member is in a room. Adding or removing one bumps the
// room's audience version, which shared-room turns pin in their bundle.
type RoomMember struct{ ent.Schema }

func (RoomMember) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (RoomMember) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("member_id", uuid.UUID{}).Immutable(),
		field.Enum("role").Values("owner", "member").Default("member"),
	}
}

func (RoomMember) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).Ref("members").Field("conversation_id").Unique().Required().Immutable(),
		edge.From("member", Member.Type).Ref("rooms").Field("member_id").Unique().Required().Immutable(),
	}
}

func (RoomMember) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("conversation_id", "member_id").Unique(),
		index.Fields("member_id"),
	}
}
