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

// RoomSummary is a room's durable compaction: the summary of its finished
// turns up to and including the turn at through_position, written by the
// run whose controller compacted them. Later turns read it instead of
// those turns and extend it from through_position; it only moves forward
// (the upsert refuses an older position). It summarises what history
// shows a run — members' messages and the answers — never a turn's tool
// results, and only turns every member of the audience it was built for
// could read.
type RoomSummary struct{ ent.Schema }

func (RoomSummary) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}} }

func (RoomSummary) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		// ThroughPosition is the journal position of the last turn the
		// summary covers.
		field.Int64("through_position"),
		field.Text("summary"),
		// Turns is how many turns the summary covers.
		field.Int64("turns").Default(0),
		// TurnID is the turn whose run wrote this version.
		field.UUID("turn_id", uuid.UUID{}),
		// AudienceVersion is the room's audience version the summary was
		// built for: a run of another audience does not start from it.
		field.Int64("audience_version").Default(0),
		// Evidence is every document the summarised turns drew on (their
		// turn evidence, and the evidence of the summary it extended): a
		// run starts from the summary only while every current member of
		// the room may read them all.
		field.JSON("evidence", []uuid.UUID{}).Optional(),
		field.Time("updated_at").Default(time.Now).Annotations(entsql.Default("CURRENT_TIMESTAMP")),
	}
}

func (RoomSummary) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).Ref("summary").Field("conversation_id").Unique().Required().Immutable(),
	}
}

func (RoomSummary) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Checks(map[string]string{"room_summaries_bounded": "octet_length(summary) <= 65536"}),
	}
}

// ModelCall is one model request of a run and its response, kept for
// audit (turn replay): what the model was asked and answered at each step,
// after redaction and bounded in size. The backend writes it when the
// step ends, fenced by the run's lease token.
type ModelCall struct{ ent.Schema }

func (ModelCall) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (ModelCall) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("conversation_id", uuid.UUID{}).Immutable(),
		field.UUID("turn_id", uuid.UUID{}).Immutable(),
		field.Int64("attempt").Immutable(),
		// Step numbers the run's model calls from 1, in order.
		field.Int64("step").Immutable(),
		field.String("purpose").Immutable(),
		field.String("route").Immutable(),
		// Request is the messages and tools offered, Response the text,
		// tool calls and finish reason, both redacted and bounded.
		field.JSON("request", json.RawMessage{}).Immutable(),
		field.JSON("response", json.RawMessage{}).Immutable(),
		field.Int64("input_tokens").Immutable(),
		field.Int64("output_tokens").Immutable(),
		field.Int64("duration_ms").Immutable(),
		// Error is set when the step failed; Response is then empty.
		field.String("error").Default("").Immutable(),
	}
}

func (ModelCall) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("turn", Turn.Type).Ref("model_calls").Field("turn_id").Unique().Required().Immutable(),
	}
}

func (ModelCall) Indexes() []ent.Index {
	return []ent.Index{
		// The room first: every unique key of a room's rows includes it
		// (docs/scaling.md; migrations/citus_test.go).
		index.Fields("conversation_id", "turn_id", "attempt", "step").Unique(),
	}
}
