package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MemberPermission is one permission a member holds. Permissions are read
// from this table on every resolution; nothing caches them across a tool
// call. (The table is not called "grant": that is an SQL keyword.)
type MemberPermission struct{ ent.Schema }

func (MemberPermission) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (MemberPermission) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("member_id", uuid.UUID{}).Immutable(),
		field.String("permission").NotEmpty().Immutable(),
	}
}

func (MemberPermission) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("member", Member.Type).Ref("permissions").Field("member_id").Unique().Required().Immutable(),
	}
}

func (MemberPermission) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("member_id", "permission").Unique(),
	}
}
