package authority

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
)

// The authorization predicates. Each rule is written here once, as a Go
// function and, where a query must apply it in the database, as the one SQL
// fragment every such query embeds, so a storage path cannot drift from
// the rule (wtf's CanEditDial is the model).

// MemberSQL is room membership as SQL: true while member is in room now.
// room and member are SQL expressions (a placeholder such as "$1", or a
// column).
func MemberSQL(room, member string) string {
	return fmt.Sprintf("EXISTS (SELECT 1 FROM room_members WHERE conversation_id = %s AND member_id = %s)", room, member)
}

// IsMember reports whether member is in room now. It is a statement of its
// own: inside a transaction that holds the room's row lock (the lock every
// membership change takes), it sees every change committed before the
// lock, and none can commit until the transaction ends.
func IsMember(ctx context.Context, q pg.Querier, room, member uuid.UUID) (bool, error) {
	var in bool
	if err := pg.QueryRow(ctx, q, "SELECT "+MemberSQL("$1", "$2"), []any{room, member}, &in); err != nil {
		return false, fmt.Errorf("membership of %s in %s: %w", member, room, err)
	}
	return in, nil
}

// Principal is the document-ACL principal of an email: ACLs name verified
// emails, lowercased in ASCII only (LowerASCII).
func Principal(email string) string { return LowerASCII(email) }

// DocumentReadableSQL is the document ACL as SQL: true when the ACL of
// document grants principal (a Principal) read access — by naming it, or
// by naming a group ("group:<name>") the member of that email is in now.
// Both are SQL expressions. A document's ACL and the groups are read at
// the moment the document is — never pinned at a turn's start.
func DocumentReadableSQL(document, principal string) string {
	// The principals are one array, computed once per statement (the
	// subquery depends on the principal only): each document is then one
	// probe of the (document_id, principal) index, as with emails alone.
	return DocumentReadableByAnySQL(document, fmt.Sprintf(`ARRAY[%[1]s::text] || ARRAY(SELECT '`+GroupPrefix+`' || g.name
    FROM member_groups g JOIN members gm ON gm.id = g.member_id WHERE gm.email = %[1]s::text)`, principal))
}

// DocumentReadableByAnySQL is the document ACL over principals already
// resolved (an SQL text[]: the email and its groups, see Principals): true
// when the ACL of document names any of them. A statement given the array
// as a parameter is planned knowing which principals it holds, so the
// planner can tell a member who reads a few hundred documents from one
// who reads most; DocumentReadableSQL's array is computed in the plan.
func DocumentReadableByAnySQL(document, principals string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM document_acls acl WHERE acl.document_id = %s AND acl.principal = ANY(%s))`, document, principals)
}

// Principals is what a document ACL may name to admit principal now: the
// principal itself and a group:<name> for each group its member is in.
// Pass it to a statement that uses DocumentReadableByAnySQL right away:
// groups are read at the moment the documents are.
func Principals(ctx context.Context, q pg.Querier, principal string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT '`+GroupPrefix+`' || g.name FROM member_groups g JOIN members gm ON gm.id = g.member_id
WHERE gm.email = $1::text ORDER BY g.name`, principal)
	if err != nil {
		return nil, fmt.Errorf("principals of %s: %w", principal, err)
	}
	defer rows.Close()
	out := []string{principal}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// GroupPrefix marks a document-ACL principal that names a group.
const GroupPrefix = "group:"

// ReadableDocuments counts how many of the distinct documents ids the
// principal may read now.
func ReadableDocuments(ctx context.Context, q pg.Querier, principal string, ids []uuid.UUID) (int, error) {
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	var n int
	err := pg.QueryRow(ctx, q, `SELECT count(*) FROM documents d WHERE d.id = ANY($2::uuid[]) AND `+DocumentReadableSQL("d.id", "$1"),
		[]any{principal, "{" + strings.Join(strs, ",") + "}"}, &n)
	if err != nil {
		return 0, fmt.Errorf("readable documents: %w", err)
	}
	return n, nil
}

// ArtifactReadableSQL is artifact visibility as SQL: true when viewer may
// read artifact now — they own it (ownerColumn is the artifact's owner), or
// a room they are a current member of holds a reference to it — and, for
// an artifact a turn made (turnColumn, NULL for an uploaded one), they may
// read that turn's evidence now (TurnReadableSQL): a file derives from
// what its turn drew on, whoever reads it, its owner included. All four
// are SQL expressions.
func ArtifactReadableSQL(artifact, ownerColumn, turnColumn, viewer string) string {
	return fmt.Sprintf(`((%s = %s OR EXISTS (SELECT 1 FROM room_resources rr WHERE rr.artifact_id = %s AND %s))
  AND (%s IS NULL OR EXISTS (SELECT 1 FROM turns mk WHERE mk.id = %s AND %s)))`,
		ownerColumn, viewer, artifact, MemberSQL("rr.conversation_id", viewer),
		turnColumn, turnColumn, TurnReadableSQL("mk.conversation_id", "mk.id", viewer))
}

// Room is what the command rule needs to know of a room.
type Room struct {
	ID uuid.UUID
	// Kind is private or shared.
	Kind    string
	OwnerID uuid.UUID
}

// MayCommand reports whether actor may steer, cancel or decide on the
// approvals of a turn that author started in room: the turn's author may,
// and in a shared room so may the room's owner. Whoever it is must also be
// a member of the room now; callers check that first (a non-member does
// not see the turn at all, see TurnVisible).
func MayCommand(actor, author uuid.UUID, room Room) bool {
	return actor == author || (room.Kind == string(entconv.KindShared) && actor == room.OwnerID)
}

// TurnVisible is the visibility rule of a turn in room: its room's
// current members see it; to anyone else it does not exist. It returns
// nil, or the NOT_FOUND error a caller returns as is: TurnNotFound, the
// very error of a turn that does not exist.
func TurnVisible(ctx context.Context, q pg.Querier, room, viewer uuid.UUID) error {
	in, err := IsMember(ctx, q, room, viewer)
	if err != nil {
		return err
	}
	if !in {
		return TurnNotFound()
	}
	return nil
}

// TurnNotFound is what a caller gets for a turn that does not exist and
// for one they may not see, alike (no existence oracle). It names no id:
// an error never echoes the request.
func TurnNotFound() error { return errcode.New(errcode.NotFound, "turn not found") }

// Holds reports whether member holds permission now: the write guard every
// tool call passes at the moment it runs, never the bundle's copy from the
// turn's start.
func Holds(ctx context.Context, q pg.Querier, member uuid.UUID, permission string) (bool, error) {
	var held bool
	err := pg.QueryRow(ctx, q, `SELECT EXISTS (SELECT 1 FROM member_permissions WHERE member_id = $1 AND permission = $2)`,
		[]any{member, permission}, &held)
	return held, err
}

// PermissionDocumentsRead is the permission every read of documents needs
// now, besides each document's ACL: retrieval and document reads by a
// tool, the documents listing, and a submission's selected documents.
const PermissionDocumentsRead = "documents.read"

// MayReadDocuments reports whether member holds documents.read now: the
// rule every read of documents applies before each document's ACL. Without
// it a member may read no document — a tool call is FORBIDDEN, a listing
// is empty, a selected document is not found.
func MayReadDocuments(ctx context.Context, q pg.Querier, member uuid.UUID) (bool, error) {
	held, err := Holds(ctx, q, member, PermissionDocumentsRead)
	if err != nil {
		return false, fmt.Errorf("permissions of %s: %w", member, err)
	}
	return held, nil
}

// AudienceReadableSQL is the shared-room evidence rule as SQL: true when
// every current member of room may read document now — each holds
// documents.read and the document's ACL names each — so that what a turn
// in a shared room reads, quotes and cites is what its whole audience may
// read. Both are SQL expressions.
func AudienceReadableSQL(document, room string) string {
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM room_members aud JOIN members am ON am.id = aud.member_id
  WHERE aud.conversation_id = %s AND NOT (
    EXISTS (SELECT 1 FROM member_permissions ap WHERE ap.member_id = am.id AND ap.permission = '%s')
    AND %s))`, room, PermissionDocumentsRead, DocumentReadableSQL(document, "am.email"))
}

// AudienceSharesRoomSQL is the shared-room rule for conversation history:
// true when every current member of room is a current member of other, so
// a turn of other is history the whole audience of room may read. Both are
// SQL expressions.
func AudienceSharesRoomSQL(room, other string) string {
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM room_members aud WHERE aud.conversation_id = %s AND NOT %s)`,
		room, MemberSQL(other, "aud.member_id"))
}

// MemberReadsDocumentSQL is the document rule for one member as SQL: true
// when member (an SQL expression naming a members.id) may read document
// now — they hold documents.read and the document's ACL admits their
// email or one of their groups. A document that no longer exists is read
// by no one.
func MemberReadsDocumentSQL(document, member string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM members rdm JOIN member_permissions rdp ON rdp.member_id = rdm.id AND rdp.permission = '%s'
  WHERE rdm.id = %s AND %s)`, PermissionDocumentsRead, member, DocumentReadableSQL(document, "rdm.email"))
}

// TurnReadableSQL is the evidence rule for one viewer as SQL: true when
// member may read now every document turn's text may derive from (its
// turn_evidence: what its tools returned, what it was given as input or
// history, transitively). A viewer for whom it is false reads the turn as
// withheld, on every read path (feed/). room, turn and member are SQL
// expressions; room is the turn's room (the evidence is keyed by it).
func TurnReadableSQL(room, turn, member string) string {
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM turn_evidence ev WHERE ev.conversation_id = %s AND ev.turn_id = %s AND NOT %s)`,
		room, turn, MemberReadsDocumentSQL("ev.document_id", member))
}

// TurnAudienceReadableSQL is the evidence rule for a model context as SQL:
// true when every current member of audience (a room) may read now every
// document of turn's evidence, so the turn's text may enter a model
// context built for that room — as history, in a room summary, or as a
// history search hit. room is the turn's own room; audience is the room
// the context is built for (the same room for history).
func TurnAudienceReadableSQL(room, turn, audience string) string {
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM turn_evidence ev WHERE ev.conversation_id = %s AND ev.turn_id = %s AND NOT %s)`,
		room, turn, AudienceReadableSQL("ev.document_id", audience))
}

// EvidenceAudienceReadableSQL is the evidence rule over a stored list of
// documents (a room summary's evidence): true when evidence, an SQL
// expression of a jsonb array of document ids, is an array and every
// current member of audience (a room) may read each of its documents now
// (AudienceReadableSQL). A list of any other form — unknown evidence — is
// read by no audience.
func EvidenceAudienceReadableSQL(evidence, audience string) string {
	return fmt.Sprintf(`(coalesce(jsonb_typeof(%[1]s) = 'array', false) AND NOT EXISTS (
  SELECT 1 FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(%[1]s) = 'array' THEN %[1]s ELSE '[]' END) sev(doc)
  WHERE NOT %[2]s))`, evidence, AudienceReadableSQL("sev.doc::uuid", audience))
}
