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
		// The lists are arrays and the budgets an object, never JSON
		// null (a check holds it): what a member's submission reads of a
		// version must always decode.
		field.Strings("tools").Default([]string{}).Immutable(),
		field.Strings("specialists").Default([]string{}).Immutable(),
		field.JSON("budgets", map[string]int64{}).Default(map[string]int64{}).Immutable(),
	}
}

func (AgentVersion) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{
			"agent_versions_lists": "jsonb_typeof(tools) = 'array' AND jsonb_typeof(specialists) = 'array' AND jsonb_typeof(budgets) = 'object'",
		}),
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
