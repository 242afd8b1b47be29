package authority

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
)

// TaskSeparator joins a room's name and one of its tasks in a
// task-suffixed scope: "<room>#task:<task uuid>".
const TaskSeparator = "#task:"

// Scope is what a scope name resolves to: a room and, for a task-suffixed
// name, one of its tasks.
type Scope struct {
	Room uuid.UUID
	Task uuid.NullUUID
}

// Resolve is the one scope resolver. It maps a room's UUID, its WEB_
// channel or its public conversation key — each possibly task-suffixed
// with TaskSeparator and a task of that room — to the room (and the task).
// Only complete names match, and only the explicit task prefix: a name
// that differs by a prefix, a suffix or another separator finds nothing,
// so a similarly named conversation never stands in for another (and never
// acquires its files). It says nothing about access; callers check
// membership. Post-run linking and invitation-time reconciliation both go
// through it.
func Resolve(ctx context.Context, q pg.Querier, ref string) (Scope, error) {
	name, task, tasked := strings.Cut(ref, TaskSeparator)
	var s Scope
	if tasked {
		id, err := uuid.Parse(task)
		if err != nil || len(task) != 36 {
			return Scope{}, errcode.New(errcode.NotFound, "conversation not found")
		}
		s.Task = uuid.NullUUID{UUID: id, Valid: true}
	}
	if id, err := uuid.Parse(name); err == nil && len(name) == 36 {
		s.Room = id
	} else {
		found, err := queryOneID(ctx, q, `SELECT id FROM conversations WHERE channel = $1 OR public_key = $1`, name)
		if err != nil {
			return Scope{}, fmt.Errorf("resolve conversation %q: %w", name, err)
		}
		if !found.Valid {
			return Scope{}, errcode.New(errcode.NotFound, "conversation not found")
		}
		s.Room = found.UUID
	}
	if s.Task.Valid {
		found, err := queryOneID(ctx, q, `SELECT id FROM tasks WHERE id = $1 AND conversation_id = $2`, s.Task.UUID, s.Room)
		if err != nil {
			return Scope{}, fmt.Errorf("resolve task %s: %w", s.Task.UUID, err)
		}
		if !found.Valid {
			return Scope{}, errcode.New(errcode.NotFound, "conversation not found")
		}
	}
	return s, nil
}

// ResolveScope resolves a scope name to its room; see Resolve.
func ResolveScope(ctx context.Context, q pg.Querier, ref string) (uuid.UUID, error) {
	s, err := Resolve(ctx, q, ref)
	return s.Room, err
}

func queryOneID(ctx context.Context, q pg.Querier, query string, args ...any) (uuid.NullUUID, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return uuid.NullUUID{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		return uuid.NullUUID{}, rows.Err()
	}
	var id uuid.UUID
	if err := rows.Scan(&id); err != nil {
		return uuid.NullUUID{}, err
	}
	return uuid.NullUUID{UUID: id, Valid: true}, rows.Err()
}
