package schema

import (
	"encoding/json"

	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// AdminEvent records one change made through the admin surface: who made
// it, which area's permission it needed (documents, members or agents),
// what it did and to what, and when. It is written in the transaction of
// the change itself, so a change that committed is always recorded, and
// only then. Rows are never updated or deleted by the server.
type AdminEvent struct{ ent.Schema }

func (AdminEvent) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (AdminEvent) Fields() []ent.Field {
	return []ent.Field{
		// ActorID is the member who made the change.
		field.UUID("actor_id", uuid.UUID{}).Immutable(),
		// Area is the admin permission the change needed.
		field.Enum("area").Values("documents", "members", "agents").Immutable(),
		// Action names the change: grant_permission, revoke_permission,
		// add_group_member, remove_group_member, add_document,
		// replace_document, set_document_readers, delete_document,
		// create_agent, add_agent_version, set_member_roster.
		field.String("action").NotEmpty().Immutable(),
		// Subject is what the change was made to: a member's email, a
		// document's id or an agent's slug.
		field.String("subject").Immutable(),
		// Detail is the change's arguments (a permission, a group, the
		// readers, a version number), never a document's body.
		field.JSON("detail", json.RawMessage{}).Optional().Immutable(),
	}
}

func (AdminEvent) Indexes() []ent.Index {
	return []ent.Index{
		// The listing: newest first, by area.
		index.Fields("area", "created_at"),
		index.Fields("created_at"),
	}
}
