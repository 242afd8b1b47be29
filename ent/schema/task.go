package schema

import (
	"encoding/json"
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Task is a member's to-do item, managed by the task tools.
type Task struct{ ent.Schema }

func (Task) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Task) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("owner_id", uuid.UUID{}).Immutable(),
		field.UUID("conversation_id", uuid.UUID{}).Optional().Immutable(),
		field.String("title").NotEmpty(),
		field.Enum("status").Values("open", "done").Default("open"),
		field.Time("updated_at").Default(time.Now).UpdateDefault(time.Now).
			Annotations(entsql.Default("CURRENT_TIMESTAMP")),
	}
}

func (Task) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("owner", Member.Type).Ref("tasks").Field("owner_id").Unique().Required().Immutable(),
	}
}

func (Task) Indexes() []ent.Index {
	return []ent.Index{index.Fields("owner_id", "status")}
}

// Approval is the gate on one external effect a run proposed: a member
// decides it; approved, the effect is executed exactly once, keyed by the
// approval's id.
type Approval struct{ ent.Schema }

func (Approval) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Approval) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("turn_id", uuid.UUID{}).Immutable(),
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		// call_id keys the call asking for the effect: the tool and its
		// canonical arguments. One approval per such call of a turn,
		// whichever attempt asks.
		field.String("call_id").NotEmpty().Immutable(),
		field.String("tool").NotEmpty().Immutable(),
		field.JSON("arguments", json.RawMessage{}).Immutable(),
		field.Enum("state").Values("pending", "approved", "rejected", "expired").Default("pending"),
		field.UUID("decided_by", uuid.UUID{}).Optional().Nillable(),
		field.Time("decided_at").Optional().Nillable(),
		field.Time("expires_at"),
		// execution_lease is the lease token of the run that claimed the
		// execution, fenced: only the turn's current run may claim it, and
		// a later run may take over from a dead one.
		field.Int64("execution_lease").Optional().Nillable(),
		// executed_at is set once, when the effect was carried out; result
		// is what it returned.
		field.Time("executed_at").Optional().Nillable(),
		field.JSON("result", json.RawMessage{}).Optional(),
	}
}

func (Approval) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("turn", Turn.Type).Ref("approvals").Field("turn_id").Unique().Required().Immutable(),
	}
}

func (Approval) Indexes() []ent.Index {
	return []ent.Index{
		// The room first: every unique key of a room's rows includes it
		// (docs/scaling.md; migrations/citus_test.go).
		index.Fields("conversation_id", "turn_id", "call_id").Unique(),
	}
}

func (Approval) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{
			"approvals_decided_check":  "(state = 'pending') = (decided_at IS NULL)",
			"approvals_executed_check": "executed_at IS NULL OR state = 'approved'",
		}),
	}
}

// MemberAgentConfig is a member's configuration of an agent: the
// specialists they allow it to route to. The effective roster of a turn is
// the agent version's roster ∩ this one.
type MemberAgentConfig struct{ ent.Schema }

func (MemberAgentConfig) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (MemberAgentConfig) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("member_id", uuid.UUID{}).Immutable(),
		field.UUID("agent_id", uuid.UUID{}).Immutable(),
		// An array, never JSON null (a check holds it).
		field.Strings("specialists").Default([]string{}),
	}
}

func (MemberAgentConfig) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("member", Member.Type).Ref("agent_configs").Field("member_id").Unique().Required().Immutable(),
		edge.From("agent", Agent.Type).Ref("member_configs").Field("agent_id").Unique().Required().Immutable(),
	}
}

func (MemberAgentConfig) Indexes() []ent.Index {
	return []ent.Index{index.Fields("member_id", "agent_id").Unique()}
}

func (MemberAgentConfig) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{"member_agent_configs_list": "jsonb_typeof(specialists) = 'array'"}),
	}
}
