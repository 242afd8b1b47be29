package authority

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
)

// ErrNoSpecialist reports a specialist slug that names no agent.
var ErrNoSpecialist = errors.New("no such specialist")

// Specialist is the latest version of a specialist agent: what a turn
// routed to it (or a delegation to it) runs.
type Specialist struct {
	AgentID    uuid.UUID
	VersionID  uuid.UUID
	Version    int
	Controller string
	ModelRoute string
}

const specialistVersion = `
SELECT a.id, v.id, v.version, v.controller, v.model_route FROM agents a
JOIN LATERAL (SELECT id, version, controller, model_route FROM agent_versions WHERE agent_id = a.id ORDER BY version DESC LIMIT 1) v ON true
WHERE a.slug = $1`

// LatestSpecialist reads the latest version of the specialist agent slug,
// or ErrNoSpecialist. Whether a member may use it is the roster's
// question (Bundle.Roster), not this lookup's.
func LatestSpecialist(ctx context.Context, q pg.Querier, slug string) (Specialist, error) {
	var s Specialist
	err := pg.QueryRow(ctx, q, specialistVersion, []any{slug}, &s.AgentID, &s.VersionID, &s.Version, &s.Controller, &s.ModelRoute)
	if errors.Is(err, sql.ErrNoRows) {
		return Specialist{}, ErrNoSpecialist
	}
	if err != nil {
		return Specialist{}, fmt.Errorf("specialist %q: %w", slug, err)
	}
	return s, nil
}
