package resource

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
)

// RoomRef is an immutable room resource reference: a room's hold on one
// artifact at one digest.
type RoomRef struct {
	ID         uuid.UUID
	ArtifactID uuid.UUID
	Digest     string
}

var linkArtifacts = `
WITH shared AS (SELECT id FROM conversations WHERE id = $1 AND kind = 'shared')
INSERT INTO room_resources (id, conversation_id, artifact_id, digest, turn_id)
SELECT gen_random_uuid(), shared.id, a.id, a.sha256, a.turn_id
FROM shared, artifacts a JOIN turns t ON t.id = a.turn_id
WHERE t.conversation_id = shared.id
  AND ($2::uuid[] IS NULL OR a.id = ANY($2))
  AND ` + authority.MemberSQL("shared.id", "a.owner_id") + `
ON CONFLICT (conversation_id, artifact_id) DO NOTHING`

const roomRefs = `
SELECT r.id, r.artifact_id, r.digest FROM room_resources r
WHERE r.conversation_id = $1 AND ($2::uuid[] IS NULL OR r.artifact_id = ANY($2))
ORDER BY r.created_at, r.id`

// LinkToRoom makes the room resource references of a shared room — the
// one step behind both post-run linking (a tool settled in a collaborative
// turn) and invitation-time reconciliation (a member joined). The room is
// named by any scope form, through the one scope resolver, so only its
// complete names (and explicit task suffixes) reach it. Each artifact made
// in one of the room's turns (all of them, or those listed), whose owner
// is a current member of the room, gets one immutable reference at its
// digest; the files themselves stay their owners' records. Call it in the
// transaction that checked the access it relies on. It returns the room's
// references to the listed artifacts (or all).
func LinkToRoom(ctx context.Context, q pg.Querier, scope string, only []uuid.UUID) ([]RoomRef, error) {
	s, err := authority.Resolve(ctx, q, scope)
	if err != nil {
		return nil, err
	}
	var ids any // NULL: every artifact of the room's turns
	if only != nil {
		strs := make([]string, len(only))
		for i, id := range only {
			strs[i] = id.String()
		}
		ids = pq.StringArray(strs)
	}
	if _, err := q.ExecContext(ctx, linkArtifacts, s.Room, ids); err != nil {
		return nil, fmt.Errorf("link artifacts to %s: %w", s.Room, err)
	}
	rows, err := q.QueryContext(ctx, roomRefs, s.Room, ids)
	if err != nil {
		return nil, fmt.Errorf("room references of %s: %w", s.Room, err)
	}
	defer rows.Close()
	var out []RoomRef
	for rows.Next() {
		var r RoomRef
		if err := rows.Scan(&r.ID, &r.ArtifactID, &r.Digest); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
