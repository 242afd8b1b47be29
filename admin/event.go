package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entevent "github.com/turngate/turngate/ent/adminevent"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
)

// Event is one admin change as the admin record holds it.
type Event struct {
	ID      uuid.UUID
	ActorID uuid.UUID
	// Area is documents, members or agents: the permission the change
	// needed.
	Area    string
	Action  string
	Subject string
	// Detail is the change's arguments as a JSON object; never a
	// document's body.
	Detail json.RawMessage
	At     time.Time
}

// The areas of the admin record, by the permission each needs.
var areas = map[string]entevent.Area{
	PermDocuments: entevent.AreaDocuments,
	PermMembers:   entevent.AreaMembers,
	PermAgents:    entevent.AreaAgents,
}

// record writes the admin event of a change in the change's transaction:
// it commits with the change, or neither does. The time is the
// database's, read after the change's locks, so the record's order is
// the order in which changes that waited for each other were made, on
// any replica.
func record(ctx context.Context, q pg.Querier, actor authority.Member, perm, action, subject string, detail map[string]any) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("admin event %s: %w", action, err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO admin_events (id, created_at, actor_id, area, action, subject, detail)
VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6::jsonb)`, uuid.New(), actor.ID, string(areas[perm]), action, subject, string(raw)); err != nil {
		return fmt.Errorf("admin event %s: %w", action, err)
	}
	return nil
}

// Events lists the admin record newest first, first from offset: the
// changes of the areas whose permission the actor holds now; FORBIDDEN
// with none of them.
func (s *Service) Events(ctx context.Context, actor authority.Member, first, offset int) ([]*Event, error) {
	var readable []entevent.Area
	for _, p := range adminPermissions {
		held, err := authority.Holds(ctx, s.Client, actor.ID, p)
		if err != nil {
			return nil, fmt.Errorf("admin record: %w", err)
		}
		if held {
			readable = append(readable, areas[p])
		}
	}
	if len(readable) == 0 {
		return nil, errcode.New(errcode.Forbidden, "the admin record needs one of the permissions %s", strings.Join(adminPermissions, ", "))
	}
	es, err := s.Client.AdminEvent.Query().Where(entevent.AreaIn(readable...)).
		Order(ent.Desc(entevent.FieldCreatedAt), ent.Desc(entevent.FieldID)).Offset(offset).Limit(first).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("admin record: %w", err)
	}
	out := make([]*Event, len(es))
	for i, e := range es {
		out[i] = &Event{ID: e.ID, ActorID: e.ActorID, Area: string(e.Area), Action: e.Action, Subject: e.Subject, Detail: e.Detail, At: e.CreatedAt}
		if len(out[i].Detail) == 0 || string(out[i].Detail) == "null" {
			out[i].Detail = json.RawMessage("{}")
		}
	}
	return out, nil
}
