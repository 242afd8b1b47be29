package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
)

// The bounds of an admin change are decided in the change's own
// transaction, under row locks that order it against every other admin
// change, so what a check read stays true until the change commits. Under
// READ COMMITTED a statement that waited for a lock still reads the
// snapshot it started with, so each check is a statement of its own,
// after the statement that took the lock.
//
// Every change takes its locks in this order, so no two wait on each
// other in a cycle:
//
//  1. member rows, in id order: a permission or group change holds its
//     actor's and its subject's FOR NO KEY UPDATE; any other change holds
//     its actor's FOR SHARE. While a transaction holds a member's row, no
//     one else changes that member's permissions or groups.
//  2. every admin:members row, in id order, FOR UPDATE: a revocation of
//     admin:members only (the last holder rule).
//  3. the actor's rows of the permissions the change needs, FOR SHARE.
//  4. document rows: the document a change changes, FOR UPDATE (as
//     resource.SetReaders takes it); the documents a group gives, in id
//     order, FOR SHARE.

// Lock strengths of lockMembers. NO KEY UPDATE, not UPDATE: rows that
// reference a member (turns, room memberships) can still be written.
const (
	forChange = "FOR NO KEY UPDATE"
	forShare  = "FOR SHARE"
)

// adminPermissions are the admin surface's own permissions.
var adminPermissions = []string{PermDocuments, PermMembers, PermAgents}

// lockMembers locks the rows of the members ids, in id order.
func lockMembers(ctx context.Context, q pg.Querier, mode string, ids ...uuid.UUID) error {
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	if _, err := pg.QueryIDs(ctx, q, `SELECT id FROM members WHERE id = ANY($1::uuid[]) ORDER BY id `+mode, pq.Array(strs)); err != nil {
		return fmt.Errorf("lock members: %w", err)
	}
	return nil
}

// holdsNow fails FORBIDDEN, naming the first permission of perms the
// actor does not hold. It locks the actor's rows of perms FOR SHARE: a
// revocation of one of them waits for this change to commit, and this
// change sees a revocation that committed first.
func holdsNow(ctx context.Context, q pg.Querier, actor uuid.UUID, perms ...string) error {
	rows, err := q.QueryContext(ctx, `SELECT permission FROM member_permissions
WHERE member_id = $1 AND permission = ANY($2) ORDER BY id FOR SHARE`, actor, pq.Array(perms))
	if err != nil {
		return fmt.Errorf("permissions of %s: %w", actor, err)
	}
	defer rows.Close()
	var held []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return err
		}
		held = append(held, p)
	}
	if err := pg.CloseRows(rows); err != nil {
		return fmt.Errorf("permissions of %s: %w", actor, err)
	}
	for _, p := range perms {
		if !slices.Contains(held, p) {
			return lacking(p)
		}
	}
	return nil
}

// lacking is the refusal of a change that needs permission p, which the
// actor does not hold. An admin permission is named; any other is the
// one the client sent, and is not quoted back.
func lacking(p string) error {
	msg := "you may grant or revoke only a permission you hold yourself"
	if slices.Contains(adminPermissions, p) {
		msg = "this needs the " + p + " permission, which you do not hold"
	}
	return &errcode.Error{Code: errcode.Forbidden, Field: "permission", Message: msg}
}

// lockActor takes an actor's locks for a change that needs perm and is no
// permission or group change: their member row FOR SHARE, then their row
// of perm, and fails FORBIDDEN unless they hold it now.
func lockActor(ctx context.Context, q pg.Querier, actor authority.Member, perm string) error {
	if err := lockMembers(ctx, q, forShare, actor.ID); err != nil {
		return err
	}
	return holdsNow(ctx, q, actor.ID, perm)
}

// notOutranked fails FORBIDDEN when subject holds an admin permission the
// actor does not: whoever acts for others is bounded by what they hold,
// and a member who holds more than the actor is not the actor's to
// change. Both member rows are locked (lockMembers), so what it reads
// stands until the change commits.
func notOutranked(ctx context.Context, q pg.Querier, actor uuid.UUID, subject uuid.UUID, email string) error {
	var above string
	err := pg.QueryRow(ctx, q, `SELECT s.permission FROM member_permissions s
WHERE s.member_id = $2 AND s.permission = ANY($3)
  AND NOT EXISTS (SELECT 1 FROM member_permissions a WHERE a.member_id = $1 AND a.permission = s.permission)
ORDER BY s.permission LIMIT 1`, []any{actor, subject, pq.Array(adminPermissions)}, &above)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("permissions of %s: %w", subject, err)
	}
	return &errcode.Error{Code: errcode.Forbidden, Field: "email", Message: "that member holds " + above + ", which you do not hold: only a member who holds it may change their permissions or groups"}
}

// lockMembersAdmins locks every admin:members row, in id order, and
// returns their holders: two revocations of admin:members (of each
// other, or each of their own) then run one after the other, and the
// second sees the first.
func lockMembersAdmins(ctx context.Context, q pg.Querier) ([]uuid.UUID, error) {
	ids, err := pg.QueryIDs(ctx, q, `SELECT member_id FROM member_permissions WHERE permission = $1 ORDER BY id FOR UPDATE`, PermMembers)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", PermMembers, err)
	}
	return ids, nil
}

// groupWithin fails FORBIDDEN unless the actor may read now every
// document whose readers name group: a group gives its members what
// those documents' readers give it, so who changes its members gives or
// takes nothing beyond what they hold. Those documents are locked FOR
// SHARE (a change of their readers holds them FOR UPDATE), then read
// again in a statement of its own.
func groupWithin(ctx context.Context, q pg.Querier, actor authority.Member, group string) error {
	ids, err := pg.QueryIDs(ctx, q, `SELECT d.id FROM documents d
WHERE EXISTS (SELECT 1 FROM document_acls a WHERE a.document_id = d.id AND a.principal = $1)
ORDER BY d.id FOR SHARE OF d`, authority.GroupPrefix+group)
	if err != nil {
		return fmt.Errorf("documents of group %s: %w", group, err)
	}
	if len(ids) == 0 {
		return nil
	}
	readable, err := readableNow(ctx, q, actor, ids)
	if err != nil {
		return err
	}
	if n := len(ids) - readable; n > 0 {
		return &errcode.Error{Code: errcode.Forbidden, Field: "group", Message: fmt.Sprintf("the readers of %d document(s) you may not read name that group: only who may read them all changes who is in it", n)}
	}
	return nil
}

// readableNow counts how many of the distinct documents ids the actor may
// read now: documents.read and each document's ACL (authority's rules).
func readableNow(ctx context.Context, q pg.Querier, actor authority.Member, ids []uuid.UUID) (int, error) {
	may, err := authority.MayReadDocuments(ctx, q, actor.ID)
	if err != nil || !may {
		return 0, err
	}
	return authority.ReadableDocuments(ctx, q, authority.Principal(actor.Email), ids)
}

// lockedDocument is a document locked for a change.
type lockedDocument struct {
	title, digest string
}

// lockDocument locks document id FOR UPDATE and fails NOT_FOUND when
// there is none, FORBIDDEN unless the actor may read it now: an operator
// changes only what they may read themselves.
func lockDocument(ctx context.Context, q pg.Querier, actor authority.Member, id uuid.UUID) (lockedDocument, error) {
	var d lockedDocument
	err := pg.QueryRow(ctx, q, `SELECT title, digest FROM documents WHERE id = $1 FOR UPDATE`, []any{id}, &d.title, &d.digest)
	if errors.Is(err, sql.ErrNoRows) {
		return d, &errcode.Error{Code: errcode.NotFound, Field: "documentId", Message: "document not found"}
	}
	if err != nil {
		return d, fmt.Errorf("lock document %s: %w", id, err)
	}
	n, err := readableNow(ctx, q, actor, []uuid.UUID{id})
	if err != nil {
		return d, err
	}
	if n == 0 {
		return d, errcode.New(errcode.Forbidden, "you may not read document %s, so you may not change it", id)
	}
	return d, nil
}
