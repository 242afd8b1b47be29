package authority

import (
	"strings"

	"github.com/google/uuid"
	"github.com/lib/pq"

	entconv "github.com/turngate/turngate/ent/conversation"
)

// BundleColumns is the select list an accepting statement embeds to read,
// in the statement that takes the room's position under its row lock,
// what a turn's authority bundle needs as of that moment: the room (a
// relation named room with kind, audience_version and agent_id), the
// latest version of its agent (joined as av by BundleJoin), and the
// member's permissions and effective roster (member is the SQL expression
// of the member's id, such as "$2"). Scan it into a BundleRow.
//
// The effective roster is the strings both lists name. Stored admin data
// never fails the statement (and with it a member's submission): a list
// that is not a JSON array (SQL NULL, JSON null, an object, a scalar)
// names nothing, and an element that is not a string is no specialist.
func BundleColumns(member string) string {
	return strings.NewReplacer("$member", member, "$versionList", jsonList("av.specialists"), "$rosterList", jsonList("m.specialists")).
		Replace(`room.kind, room.audience_version, room.agent_id,
       av.id, av.version, av.controller, av.model_route,
       COALESCE((SELECT array_agg(permission ORDER BY permission) FROM member_permissions WHERE member_id = $member), '{}'),
       COALESCE((SELECT array_agg(DISTINCT e #>> '{}' ORDER BY e #>> '{}') FROM jsonb_array_elements($versionList) e
         WHERE jsonb_typeof(e) = 'string' AND EXISTS (SELECT 1 FROM member_agent_configs m
                       WHERE m.member_id = $member AND m.agent_id = room.agent_id AND $rosterList @> jsonb_build_array(e))), '{}')`)
}

// jsonList is the SQL of a jsonb column read as a list: the column when
// it holds a JSON array, else an empty one.
func jsonList(column string) string {
	return "(CASE WHEN jsonb_typeof(" + column + ") = 'array' THEN " + column + " ELSE '[]'::jsonb END)"
}

// BundleJoin joins the latest version of the room's agent as av.
const BundleJoin = `JOIN LATERAL (
  SELECT id, version, controller, model_route, specialists FROM agent_versions
  WHERE agent_id = room.agent_id ORDER BY version DESC LIMIT 1
) av ON true`

// BundleRow receives BundleColumns.
type BundleRow struct {
	kind        string
	audience    int64
	agentID     uuid.UUID
	versionID   uuid.UUID
	version     int
	controller  string
	route       string
	permissions pq.StringArray
	roster      pq.StringArray
}

// Dest is the scan destinations of BundleColumns, in order.
func (r *BundleRow) Dest() []any {
	return []any{&r.kind, &r.audience, &r.agentID, &r.versionID, &r.version, &r.controller, &r.route, &r.permissions, &r.roster}
}

// ResolveBundle is the one place a turn's authority bundle is resolved:
// the member as their identity was verified, the room and — in a shared
// room — its audience version, the room agent's latest version, the
// member's permissions and effective roster as BundleColumns read them at
// acceptance. The one-turn specialist route and the resource manifest are
// pinned on it by the accepting transaction, from the member's own
// selections, each checked by this package's predicates.
func ResolveBundle(m Member, room uuid.UUID, r BundleRow) Bundle {
	b := Bundle{
		MemberID: m.ID, PlatformUserID: m.PlatformUserID, Email: m.Email, DisplayName: m.DisplayName,
		ConversationID: room, ConversationKind: r.kind, Permissions: r.permissions,
		AgentID: r.agentID, AgentVersionID: r.versionID, AgentVersion: r.version, Controller: r.controller, ModelRoute: r.route,
	}
	if r.kind == string(entconv.KindShared) {
		b.AudienceVersion = r.audience
	}
	if len(r.roster) > 0 {
		b.Roster = r.roster
	}
	return b
}
