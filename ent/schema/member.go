package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// Member is a platform user known to turngate. The lowercased verified
// email is the document-ACL principal, so it is unique.
type Member struct{ ent.Schema }

func (Member) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Member) Fields() []ent.Field {
	return []ent.Field{
		field.String("platform_user_id").NotEmpty().Unique().Immutable(),
		field.String("email").NotEmpty().Unique(),
		field.String("display_name").Default(""),
	}
}

func (Member) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("permissions", MemberPermission.Type),
		edge.To("rooms", RoomMember.Type),
		edge.To("owned_conversations", Conversation.Type),
		edge.To("turns", Turn.Type),
		edge.To("artifacts", Artifact.Type),
		edge.To("tasks", Task.Type),
		edge.To("agent_configs", MemberAgentConfig.Type),
		edge.To("groups", MemberGroup.Type),
	}
}
