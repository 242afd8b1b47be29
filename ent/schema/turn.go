package schema

import (
	"encoding/json"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Turn is one accepted input and the run that answers it. It is created once
// per (conversation, author, idempotency key), however often the submission
// is retried, and ends in exactly one terminal state.
//
// The lease fields fence a run: a claim increments lease_token, and every
// write the run makes carries its token in the WHERE clause, so a runner
// that lost its claim can change nothing. Lease times use the database
// clock.
type Turn struct{ ent.Schema }

func (Turn) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Turn) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("author_id", uuid.UUID{}).Immutable(),
		field.String("idempotency_key").NotEmpty().Immutable(),
		field.Text("input").Immutable(),
		// position is the journal seq of the turn_accepted entry: the
		// room's FIFO lane order.
		field.Int64("position").Immutable(),
		field.Enum("state").Values("queued", "running", "completed", "failed", "cancelled").Default("queued"),
		// agent_version_id has no foreign key on purpose: every turn of an
		// agent would take a share lock on the same parent row, and
		// concurrent acceptances would queue on it. Agent versions are
		// immutable and cannot be deleted (a trigger refuses both), so
		// the version a turn names always exists.
		field.UUID("agent_version_id", uuid.UUID{}).Immutable(),
		field.JSON("authority_bundle", json.RawMessage{}).Immutable(),
		field.String("authority_digest").NotEmpty().Immutable(),
		field.String("lease_owner").Optional().Nillable(),
		field.Int64("lease_token").Default(0),
		field.Time("lease_expires_at").Optional().Nillable(),
		field.Int("attempt").Default(0),
		field.String("terminal_reason").Optional().Nillable(),
		field.Text("answer").Optional().Nillable(),
		field.Time("started_at").Optional().Nillable(),
		field.Time("finished_at").Optional().Nillable(),
		// checkpoint is the run's last durable checkpoint, written fenced by
		// the lease token; a replacement attempt resumes from it.
		field.JSON("checkpoint", json.RawMessage{}).Optional(),
		// specialist is the one-turn specialist route chosen at submit,
		// from the effective roster.
		field.String("specialist").Optional().Immutable(),
		// usage is settled once, in the terminal's transaction.
		field.JSON("usage", json.RawMessage{}).Optional(),
		// trace_parent is the W3C traceparent of the acceptance's span:
		// every attempt's run, on whichever replica claims it, continues
		// the turn's one trace from it. Empty when tracing is off.
		field.String("trace_parent").Optional().Immutable(),
	}
}

func (Turn) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{
			"turns_state_check": "state IN ('queued', 'running', 'completed', 'failed', 'cancelled')",
			// A running turn always holds a lease; no other turn does.
			"turns_lease_check": "(state = 'running') = (lease_expires_at IS NOT NULL)",
		}),
	}
}

func (Turn) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).Ref("turns").Field("conversation_id").Unique().Required().Immutable(),
		edge.From("author", Member.Type).Ref("turns").Field("author_id").Unique().Required().Immutable(),
		edge.To("entries", JournalEntry.Type),
		edge.To("commands", Command.Type),
		edge.To("approvals", Approval.Type),
		edge.To("model_calls", ModelCall.Type),
	}
}

func (Turn) Indexes() []ent.Index {
	return []ent.Index{
		// One logical turn per idempotency key, whatever the retries.
		index.Fields("conversation_id", "author_id", "idempotency_key").Unique(),
		// The room lane: at most one running turn per room, across replicas.
		index.Fields("conversation_id").Unique().
			StorageKey("turn_one_running_per_room").
			Annotations(entsql.IndexWhere("state = 'running'")),
		// Lane heads: queued turns by position.
		index.Fields("conversation_id", "position"),
		// Expired claims, for recovery: only running turns hold a lease,
		// so accepting a queued turn adds nothing to this index.
		index.Fields("lease_expires_at").
			StorageKey("turn_running_lease_expiry").
			Annotations(entsql.IndexWhere("state = 'running'")),
	}
}
