package authority

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
)

// ResolveScope maps any server-owned name of a room — its UUID, its WEB_
// channel or its public conversation key — to the room's UUID. Only
// complete names match: a name that differs by a prefix or a suffix finds
// nothing, so a similarly named conversation can never stand in for
// another. It says nothing about access; callers check membership.
func ResolveScope(ctx context.Context, q Querier, ref string) (uuid.UUID, error) {
	if id, err := uuid.Parse(ref); err == nil && len(ref) == 36 {
		return id, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT id FROM conversations WHERE channel = $1 OR public_key = $1`, ref)
	if err != nil {
		return uuid.Nil, fmt.Errorf("resolve conversation %q: %w", ref, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return uuid.Nil, err
		}
		return uuid.Nil, errcode.New(errcode.NotFound, "conversation not found")
	}
	var id uuid.UUID
	if err := rows.Scan(&id); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}
