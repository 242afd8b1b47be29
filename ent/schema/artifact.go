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

// Artifact is a file a member owns: made by a tool (run_code,
// create_artifact) in one of their turns. Immutable; its sha256 is
// verified before any read returns its bytes.
type Artifact struct{ ent.Schema }

func (Artifact) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Artifact) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("owner_id", uuid.UUID{}).Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Optional().Immutable(),
		field.String("name").NotEmpty().Immutable(),
		field.String("media_type").NotEmpty().Immutable(),
		field.Int64("size").NonNegative().Immutable(),
		field.String("sha256").NotEmpty().Immutable(),
		field.Bytes("content").Immutable(),
	}
}

func (Artifact) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("owner", Member.Type).Ref("artifacts").Field("owner_id").Unique().Required().Immutable(),
		edge.To("references", RoomResource.Type),
	}
}

func (Artifact) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{"artifacts_size_check": "size = octet_length(content)"}),
	}
}

// RoomResource is the immutable reference that makes an owner's artifact
// part of a room: room, artifact, digest. Made when a tool settles in a
// collaborative turn, after the initiating member's room access is
// re-checked; reloads read the same reference.
type RoomResource struct{ ent.Schema }

func (RoomResource) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (RoomResource) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("artifact_id", uuid.UUID{}).Immutable(),
		field.String("digest").NotEmpty().Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Optional().Immutable(),
	}
}

func (RoomResource) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).Ref("resources").Field("conversation_id").Unique().Required().Immutable(),
		edge.From("artifact", Artifact.Type).Ref("references").Field("artifact_id").Unique().Required().Immutable(),
	}
}

func (RoomResource) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("conversation_id", "artifact_id").Unique(),
	}
}
