package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
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

// MemberGroup puts a member in a named group. A document's ACL may name a
// group ("group:<name>"): its members read the document. Like
// permissions, groups are read on every resolution.
type MemberGroup struct{ ent.Schema }

func (MemberGroup) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (MemberGroup) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("member_id", uuid.UUID{}).Immutable(),
		// Lowercase a-z 0-9 _ - . (a check in the table holds it).
		field.String("name").NotEmpty().Immutable(),
	}
}

func (MemberGroup) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("member", Member.Type).Ref("groups").Field("member_id").Unique().Required().Immutable(),
	}
}

func (MemberGroup) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("member_id", "name").Unique(),
		index.Fields("name", "member_id"),
	}
}

func (MemberGroup) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{"member_groups_name_form": "name ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'"}),
	}
}
