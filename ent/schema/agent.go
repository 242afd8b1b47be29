package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Agent is a named assistant members talk to. What it does lives in its
// versions; a turn always names the exact version it ran.
type Agent struct{ ent.Schema }

func (Agent) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Agent) Fields() []ent.Field {
	return []ent.Field{
		field.String("slug").NotEmpty().Unique(),
		field.String("name").NotEmpty(),
	}
}

func (Agent) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("versions", AgentVersion.Type),
		edge.To("member_configs", MemberAgentConfig.Type),
	}
}

// AgentVersion is immutable once written (a trigger in the migrations
// refuses UPDATE): a turn's authority bundle pins one version, and what that
// version means must never change under it.
type AgentVersion struct{ ent.Schema }

func (AgentVersion) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (AgentVersion) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).Immutable(),
		field.Int("version").Positive().Immutable(),
		field.String("controller").NotEmpty().Immutable(),
		field.String("model_route").NotEmpty().Immutable(),
		field.String("effort").Default("medium").Immutable(),
		field.Text("system_prompt").Default("").Immutable(),
		field.Strings("tools").Optional().Immutable(),
		field.Strings("specialists").Optional().Immutable(),
		field.JSON("budgets", map[string]int64{}).Optional().Immutable(),
	}
}

func (AgentVersion) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).Ref("versions").Field("agent_id").Unique().Required().Immutable(),
	}
}

func (AgentVersion) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "version").Unique(),
	}
}
