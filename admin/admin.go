package admin

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entagent "github.com/turngate/turngate/ent/agent"
	entversion "github.com/turngate/turngate/ent/agentversion"
	entacl "github.com/turngate/turngate/ent/documentacl"
	entmember "github.com/turngate/turngate/ent/member"
	entconfig "github.com/turngate/turngate/ent/memberagentconfig"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// The platform permissions of the admin surface.
const (
	PermDocuments = "admin:documents"
	PermMembers   = "admin:members"
	PermAgents    = "admin:agents"
)

// Bounds of what an operator can make the server hold in one call.
const (
	MaxTitle      = 200
	MaxBody       = 512 << 10
	MaxReaders    = 200
	MaxPrompt     = 16 << 10
	MaxListLength = 500
)

// Service runs the admin operations.
type Service struct {
	Client *ent.Client
}

// require fails FORBIDDEN unless actor holds permission now.
func (s *Service) require(ctx context.Context, actor authority.Member, permission string) error {
	held, err := authority.Holds(ctx, s.Client, actor.ID, permission)
	if err != nil {
		return err
	}
	if !held {
		return errcode.New(errcode.Forbidden, "this needs the %s permission", permission)
	}
	return nil
}

var (
	groupName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	permission = regexp.MustCompile(`^[a-z][a-z0-9_.:-]{0,63}$`)
	slugForm   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	emailForm  = regexp.MustCompile(`^[^@\s]{1,64}@[^@\s]{1,255}$`)
)

// readers checks and normalises a reader list: emails (lowercased, as
// ACLs name them) and group:<name>.
func readers(in []string) ([]string, error) {
	if len(in) > MaxReaders {
		return nil, errcode.Invalid("readers", "at most %d readers", MaxReaders)
	}
	out := make([]string, 0, len(in))
	for i, r := range in {
		r = strings.TrimSpace(r)
		if g, ok := strings.CutPrefix(r, authority.GroupPrefix); ok {
			if !groupName.MatchString(g) {
				return nil, errcode.Invalid("readers", "readers[%d] is not a group name (a-z 0-9 _ . -)", i)
			}
		} else if !emailForm.MatchString(r) {
			return nil, errcode.Invalid("readers", "readers[%d] is neither an email nor group:<name>", i)
		} else {
			r = authority.Principal(r)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func checkTitle(title string) error {
	if t := strings.TrimSpace(title); t == "" || len(t) > MaxTitle {
		return errcode.Invalid("title", "a title of 1 to %d bytes", MaxTitle)
	}
	return nil
}

func checkBody(body string) error {
	if strings.TrimSpace(body) == "" || len(body) > MaxBody {
		return errcode.Invalid("body", "a body of 1 byte to %d KiB", MaxBody>>10)
	}
	return nil
}

// Document is a document as an operator sees it.
type Document struct {
	ID        uuid.UUID
	Title     string
	Digest    string
	Readers   []string
	Passages  int
	CreatedAt time.Time
}

// AddDocument stores a document (text or Markdown) with its readers; the
// server cuts it into passages for retrieval. Adding is not bounded by
// what the caller may read: they supply the content.
func (s *Service) AddDocument(ctx context.Context, actor authority.Member, title, body string, readerList []string) (*Document, error) {
	if err := s.require(ctx, actor, PermDocuments); err != nil {
		return nil, err
	}
	if err := checkTitle(title); err != nil {
		return nil, err
	}
	if err := checkBody(body); err != nil {
		return nil, err
	}
	rs, err := readers(readerList)
	if err != nil {
		return nil, err
	}
	title = strings.TrimSpace(title)
	var id uuid.UUID
	err = s.tx(ctx, func(tx *ent.Tx) (err error) {
		if err := lockActor(ctx, tx, actor, PermDocuments); err != nil {
			return err
		}
		if id, err = resource.AddDocument(ctx, tx, resource.Document{Title: title, Body: body, Readers: rs}); err != nil {
			return err
		}
		return record(ctx, tx, actor, PermDocuments, "add_document", id.String(),
			map[string]any{"title": title, "digest": resource.Digest(body), "readers": rs})
	})
	if err != nil {
		return nil, err
	}
	return s.document(ctx, id)
}

// ReplaceDocument gives a document new content (and a title, when not
// empty): a new digest; answers that cited it keep the digest they cited.
// Only a document the caller may read now is theirs to replace; the same
// title and body again change nothing.
func (s *Service) ReplaceDocument(ctx context.Context, actor authority.Member, id uuid.UUID, title, body string) (*Document, error) {
	if err := s.require(ctx, actor, PermDocuments); err != nil {
		return nil, err
	}
	title = strings.TrimSpace(title)
	if title != "" {
		if err := checkTitle(title); err != nil {
			return nil, err
		}
	}
	if err := checkBody(body); err != nil {
		return nil, err
	}
	err := s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermDocuments); err != nil {
			return err
		}
		d, err := lockDocument(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		newTitle := cmp.Or(title, d.title)
		digest := resource.Digest(body)
		if newTitle == d.title && digest == d.digest {
			return nil
		}
		if err := resource.ReplaceDocument(ctx, tx, id, newTitle, body); err != nil {
			return err
		}
		detail := map[string]any{"title": newTitle, "digest": digest, "previousDigest": d.digest}
		if newTitle != d.title {
			detail["previousTitle"] = d.title
		}
		return record(ctx, tx, actor, PermDocuments, "replace_document", id.String(), detail)
	})
	if err != nil {
		return nil, err
	}
	return s.document(ctx, id)
}

// SetReaders replaces the readers of a document the caller may read now;
// a running turn's next tool call reads the new list.
func (s *Service) SetReaders(ctx context.Context, actor authority.Member, id uuid.UUID, readerList []string) (*Document, error) {
	if err := s.require(ctx, actor, PermDocuments); err != nil {
		return nil, err
	}
	rs, err := readers(readerList)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermDocuments); err != nil {
			return err
		}
		if _, err := lockDocument(ctx, tx, actor, id); err != nil {
			return err
		}
		was, err := documentReaders(ctx, tx, id)
		if err != nil {
			return err
		}
		now := slices.Sorted(slices.Values(rs))
		if slices.Equal(was, now) {
			return nil
		}
		if err := resource.SetReaders(ctx, tx, id, rs); err != nil {
			return err
		}
		return record(ctx, tx, actor, PermDocuments, "set_document_readers", id.String(),
			map[string]any{"readers": now, "previousReaders": was})
	})
	if err != nil {
		return nil, err
	}
	return s.document(ctx, id)
}

// documentReaders are the principals of a document's ACL, sorted.
func documentReaders(ctx context.Context, tx *ent.Tx, id uuid.UUID) ([]string, error) {
	acl, err := tx.DocumentACL.Query().Where(entacl.DocumentID(id)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("readers of %s: %w", id, err)
	}
	out := make([]string, len(acl))
	for i, a := range acl {
		out[i] = a.Principal
	}
	slices.Sort(out)
	return out, nil
}

// DeleteDocument removes a document the caller may read now.
func (s *Service) DeleteDocument(ctx context.Context, actor authority.Member, id uuid.UUID) error {
	if err := s.require(ctx, actor, PermDocuments); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermDocuments); err != nil {
			return err
		}
		d, err := lockDocument(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		if err := resource.DeleteDocument(ctx, tx, id); err != nil {
			return err
		}
		return record(ctx, tx, actor, PermDocuments, "delete_document", id.String(), map[string]any{"title": d.title, "digest": d.digest})
	})
}

// Documents lists every document, by title, first from offset.
func (s *Service) Documents(ctx context.Context, actor authority.Member, first, offset int) ([]*Document, error) {
	if err := s.require(ctx, actor, PermDocuments); err != nil {
		return nil, err
	}
	docs, err := s.Client.Document.Query().Order(ent.Asc("title"), ent.Asc("id")).Offset(offset).Limit(first).
		WithACL().WithPassages().All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Document, len(docs))
	for i, d := range docs {
		out[i] = toDocument(d)
	}
	return out, nil
}

func (s *Service) document(ctx context.Context, id uuid.UUID) (*Document, error) {
	doc, err := s.Client.Document.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, &errcode.Error{Code: errcode.NotFound, Field: "documentId", Message: "document not found"}
	}
	if err != nil {
		return nil, err
	}
	acl, err := doc.QueryACL().All(ctx)
	if err != nil {
		return nil, err
	}
	n, err := doc.QueryPassages().Count(ctx)
	if err != nil {
		return nil, err
	}
	doc.Edges.ACL = acl
	out := toDocument(doc)
	out.Passages = n
	return out, nil
}

func toDocument(d *ent.Document) *Document {
	out := &Document{ID: d.ID, Title: d.Title, Digest: d.Digest, CreatedAt: d.CreatedAt, Passages: len(d.Edges.Passages)}
	for _, a := range d.Edges.ACL {
		out.Readers = append(out.Readers, a.Principal)
	}
	sort.Strings(out.Readers)
	return out
}

// maxAttempts bounds how often tx runs a change the database rolled back
// to break a deadlock or a serialization conflict.
const maxAttempts = 3

// tx runs f in a transaction, again when the database rolled it back to
// break a deadlock (nothing of it was written); resource.ErrNoDocument is
// NOT_FOUND.
func (s *Service) tx(ctx context.Context, f func(*ent.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, f)
		if err == nil || !pg.IsTransient(err) || attempt == maxAttempts {
			return err
		}
	}
}

func (s *Service) txOnce(ctx context.Context, f func(*ent.Tx) error) error {
	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		if errors.Is(err, resource.ErrNoDocument) {
			return errcode.New(errcode.NotFound, "no such document")
		}
		return err
	}
	return tx.Commit()
}

// Member is a member as an operator sees them.
type Member struct {
	ID          uuid.UUID
	Email       string
	DisplayName string
	Permissions []string
	Groups      []string
}

// Members lists members by email, first from offset.
func (s *Service) Members(ctx context.Context, actor authority.Member, first, offset int) ([]*Member, error) {
	if err := s.require(ctx, actor, PermMembers); err != nil {
		return nil, err
	}
	ms, err := s.Client.Member.Query().Order(ent.Asc(entmember.FieldEmail)).Offset(offset).Limit(first).WithPermissions().WithGroups().All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Member, len(ms))
	for i, m := range ms {
		out[i] = toMember(m)
	}
	return out, nil
}

func toMember(m *ent.Member) *Member {
	out := &Member{ID: m.ID, Email: m.Email, DisplayName: m.DisplayName, Permissions: []string{}, Groups: []string{}}
	for _, p := range m.Edges.Permissions {
		out.Permissions = append(out.Permissions, p.Permission)
	}
	for _, g := range m.Edges.Groups {
		out.Groups = append(out.Groups, g.Name)
	}
	sort.Strings(out.Permissions)
	sort.Strings(out.Groups)
	return out
}

// member finds the member of an email, NOT_FOUND when none signed in yet.
func (s *Service) member(ctx context.Context, email string) (*ent.Member, error) {
	m, err := s.Client.Member.Query().Where(entmember.Email(authority.Principal(strings.TrimSpace(email)))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, &errcode.Error{Code: errcode.NotFound, Field: "email", Message: "no member has that email: a member exists once they have signed in"}
	}
	return m, err
}

func (s *Service) memberView(ctx context.Context, id uuid.UUID) (*Member, error) {
	m, err := s.Client.Member.Query().Where(entmember.ID(id)).WithPermissions().WithGroups().Only(ctx)
	if err != nil {
		return nil, err
	}
	return toMember(m), nil
}

// Grant gives a member a permission (converges when held). The caller
// must hold admin:members and the permission itself, and the member may
// hold no admin permission the caller does not.
func (s *Service) Grant(ctx context.Context, actor authority.Member, email, perm string) (*Member, error) {
	if !permission.MatchString(perm) {
		return s.memberChange(ctx, actor, email, errcode.Invalid("permission", "permission is not a permission name (a-z 0-9 _ . : -)"), nil)
	}
	return s.memberChange(ctx, actor, email, nil, func(tx *ent.Tx, m *ent.Member) error {
		if err := holdsNow(ctx, tx, actor.ID, PermMembers, perm); err != nil {
			return err
		}
		if err := notOutranked(ctx, tx, actor.ID, m.ID, m.Email); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO member_permissions (id, member_id, permission) VALUES ($1, $2, $3)
ON CONFLICT (member_id, permission) DO NOTHING`, uuid.New(), m.ID, perm)
		if err != nil {
			return fmt.Errorf("grant %s: %w", perm, err)
		}
		return recordIfChanged(ctx, tx, res, actor, PermMembers, "grant_permission", m.Email, map[string]any{"permission": perm})
	})
}

// Revoke takes a permission away (converges when not held), bounded as
// Grant is; the last holder of admin:members keeps it (CONFLICT). The
// next resolution — a running turn's next tool call included — sees it.
func (s *Service) Revoke(ctx context.Context, actor authority.Member, email, perm string) (*Member, error) {
	if !permission.MatchString(perm) {
		return s.memberChange(ctx, actor, email, errcode.Invalid("permission", "permission is not a permission name (a-z 0-9 _ . : -)"), nil)
	}
	return s.memberChange(ctx, actor, email, nil, func(tx *ent.Tx, m *ent.Member) error {
		var holders []uuid.UUID
		if perm == PermMembers {
			var err error
			if holders, err = lockMembersAdmins(ctx, tx); err != nil {
				return err
			}
		}
		if err := holdsNow(ctx, tx, actor.ID, PermMembers, perm); err != nil {
			return err
		}
		if err := notOutranked(ctx, tx, actor.ID, m.ID, m.Email); err != nil {
			return err
		}
		if perm == PermMembers && len(holders) == 1 && holders[0] == m.ID {
			return &errcode.Error{Code: errcode.Conflict, Field: "email", Message: "that member is the last holder of " + PermMembers + ": grant it to another member first"}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM member_permissions WHERE member_id = $1 AND permission = $2`, m.ID, perm)
		if err != nil {
			return fmt.Errorf("revoke %s: %w", perm, err)
		}
		return recordIfChanged(ctx, tx, res, actor, PermMembers, "revoke_permission", m.Email, map[string]any{"permission": perm})
	})
}

// recordIfChanged records a change whose statement wrote a row; one that
// converged on what was there changed nothing and is not recorded.
func recordIfChanged(ctx context.Context, tx *ent.Tx, res sql.Result, actor authority.Member, perm, action, subject string, detail map[string]any) error {
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return err
	}
	return record(ctx, tx, actor, perm, action, subject, detail)
}

// memberChange applies change to the member of email, as an operator
// with admin:members, and returns the member as it is then; invalid (the
// change's own input check) is returned after the permission check.
// change runs holding the actor's and the member's rows (lockMembers).
func (s *Service) memberChange(ctx context.Context, actor authority.Member, email string, invalid error, change func(*ent.Tx, *ent.Member) error) (*Member, error) {
	if err := s.require(ctx, actor, PermMembers); err != nil {
		return nil, err
	}
	if invalid != nil {
		return nil, invalid
	}
	m, err := s.member(ctx, email)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockMembers(ctx, tx, forChange, actor.ID, m.ID); err != nil {
			return err
		}
		return change(tx, m)
	})
	if err != nil {
		return nil, err
	}
	return s.memberView(ctx, m.ID)
}

// AddToGroup puts a member in a group (converges when in it).
func (s *Service) AddToGroup(ctx context.Context, actor authority.Member, email, group string) (*Member, error) {
	return s.group(ctx, actor, email, group, true)
}

// RemoveFromGroup takes a member out of a group (converges when not in it).
func (s *Service) RemoveFromGroup(ctx context.Context, actor authority.Member, email, group string) (*Member, error) {
	return s.group(ctx, actor, email, group, false)
}

// group changes who is in a group: only a caller who may read every
// document the group's name gives may (groupWithin), and only for a
// member who holds no admin permission the caller does not.
func (s *Service) group(ctx context.Context, actor authority.Member, email, group string, add bool) (*Member, error) {
	if !groupName.MatchString(group) {
		return s.memberChange(ctx, actor, email, errcode.Invalid("group", "group is not a group name (a-z 0-9 _ . -)"), nil)
	}
	return s.memberChange(ctx, actor, email, nil, func(tx *ent.Tx, m *ent.Member) error {
		if err := holdsNow(ctx, tx, actor.ID, PermMembers); err != nil {
			return err
		}
		if err := notOutranked(ctx, tx, actor.ID, m.ID, m.Email); err != nil {
			return err
		}
		if err := groupWithin(ctx, tx, actor, group); err != nil {
			return err
		}
		var res sql.Result
		var err error
		action := "add_group_member"
		if add {
			res, err = tx.ExecContext(ctx, `INSERT INTO member_groups (id, member_id, name) VALUES ($1, $2, $3)
ON CONFLICT (member_id, name) DO NOTHING`, uuid.New(), m.ID, group)
		} else {
			action = "remove_group_member"
			res, err = tx.ExecContext(ctx, `DELETE FROM member_groups WHERE member_id = $1 AND name = $2`, m.ID, group)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", action, err)
		}
		return recordIfChanged(ctx, tx, res, actor, PermMembers, action, m.Email, map[string]any{"group": group})
	})
}

// VersionInput is what an agent version says: immutable once written.
type VersionInput struct {
	Controller   string
	ModelRoute   string
	Effort       string
	SystemPrompt string
	Tools        []string
	Specialists  []string
	Budgets      map[string]int64
}

// budgetKeys are the budgets a version may set.
var budgetKeys = []string{"max_steps", "max_tool_calls", "max_tokens", "wall_time_ms", "context_tokens"}

func (v VersionInput) check() error {
	if !slices.Contains(runtime.Controllers(), v.Controller) {
		return errcode.Invalid("controller", "controller is not one of %s", strings.Join(runtime.Controllers(), ", "))
	}
	route := v.ModelRoute
	if !(route == "builtin" || route == "openai" || strings.HasPrefix(route, "openai:") && len(route) > len("openai:") && len(route) <= 128) {
		return errcode.Invalid("modelRoute", "modelRoute is builtin, openai or openai:<model> (at most 128 bytes)")
	}
	if !slices.Contains([]string{"", "low", "medium", "high"}, v.Effort) {
		return errcode.Invalid("effort", "effort is low, medium or high")
	}
	if len(v.SystemPrompt) > MaxPrompt {
		return errcode.Invalid("systemPrompt", "at most %d KiB", MaxPrompt>>10)
	}
	for i, t := range v.Tools {
		if !slices.Contains(tools.Names(), t) {
			return errcode.Invalid("tools", "tools[%d] is not one of %s", i, strings.Join(tools.Names(), ", "))
		}
	}
	if len(v.Specialists) > 20 {
		return errcode.Invalid("specialists", "at most 20 specialists")
	}
	if err := checkSlugs(v.Specialists); err != nil {
		return err
	}
	for k, n := range v.Budgets {
		if !slices.Contains(budgetKeys, k) || n < 0 {
			return errcode.Invalid("budgets", "budgets takes %s, each 0 or more", strings.Join(budgetKeys, ", "))
		}
	}
	return nil
}

// checkSlugs refuses a list of specialists that holds one not shaped
// like an agent slug, naming its position.
func checkSlugs(specialists []string) error {
	for i, sp := range specialists {
		if !slugForm.MatchString(sp) {
			return errcode.Invalid("specialists", "specialists[%d] is not an agent slug (a-z 0-9 _ -, 1 to 64)", i)
		}
	}
	return nil
}

// agentNotFound is the answer for a slug no agent has, the slug sent as
// field; it does not repeat the slug.
func agentNotFound(field string) error {
	return &errcode.Error{Code: errcode.NotFound, Field: field, Message: "no agent has that slug"}
}

// Agent is an agent with its versions, newest first.
type Agent struct {
	ID       uuid.UUID
	Slug     string
	Name     string
	Versions []*ent.AgentVersion
}

// CreateAgent makes an agent and its version 1.
func (s *Service) CreateAgent(ctx context.Context, actor authority.Member, slug, name string, v VersionInput) (*Agent, error) {
	if err := s.require(ctx, actor, PermAgents); err != nil {
		return nil, err
	}
	if !slugForm.MatchString(slug) {
		return nil, errcode.Invalid("slug", "a slug of a-z 0-9 _ - (1 to 64)")
	}
	name = strings.TrimSpace(name)
	if name == "" || len(name) > MaxTitle {
		return nil, errcode.Invalid("name", "a name of 1 to %d bytes", MaxTitle)
	}
	if err := v.check(); err != nil {
		return nil, err
	}
	v = v.normalised()
	err := s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermAgents); err != nil {
			return err
		}
		a, err := tx.Agent.Create().SetSlug(slug).SetName(name).Save(ctx)
		if ent.IsConstraintError(err) {
			return &errcode.Error{Code: errcode.Conflict, Field: "slug", Message: "an agent with that slug exists"}
		}
		if err != nil {
			return err
		}
		if err := createVersion(ctx, tx, a.ID, 1, v); err != nil {
			return err
		}
		detail := v.detail(1)
		detail["name"] = name
		return record(ctx, tx, actor, PermAgents, "create_agent", slug, detail)
	})
	if err != nil {
		return nil, err
	}
	return s.agent(ctx, slug)
}

// AddVersion writes an agent's next version. Versions are immutable; new
// turns run the newest, turns already accepted keep theirs.
func (s *Service) AddVersion(ctx context.Context, actor authority.Member, slug string, v VersionInput) (*Agent, error) {
	if err := s.require(ctx, actor, PermAgents); err != nil {
		return nil, err
	}
	if err := v.check(); err != nil {
		return nil, err
	}
	v = v.normalised()
	err := s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermAgents); err != nil {
			return err
		}
		a, err := tx.Agent.Query().Where(entagent.Slug(slug)).Only(ctx)
		if ent.IsNotFound(err) {
			return agentNotFound("slug")
		}
		if err != nil {
			return err
		}
		// The unique (agent, version) index makes two racing writers of
		// the same next version one winner and one CONFLICT.
		last, err := tx.AgentVersion.Query().Where(entversion.AgentID(a.ID)).Aggregate(ent.Max(entversion.FieldVersion)).Int(ctx)
		if err != nil {
			return err
		}
		if err := createVersion(ctx, tx, a.ID, last+1, v); err != nil {
			return err
		}
		return record(ctx, tx, actor, PermAgents, "add_agent_version", slug, v.detail(last+1))
	})
	if err != nil {
		return nil, err
	}
	return s.agent(ctx, slug)
}

// normalised is v as it is stored: lists and budgets never null (a
// check on agent_versions holds it), so what a member's submission reads
// of a version always decodes.
func (v VersionInput) normalised() VersionInput {
	v.Tools = list(v.Tools)
	v.Specialists = list(v.Specialists)
	if v.Budgets == nil {
		v.Budgets = map[string]int64{}
	}
	if v.Effort == "" {
		v.Effort = "medium"
	}
	return v
}

// detail is a version's admin-event detail: what it says, but its system
// prompt (up to 16 KiB), of which only the length is kept.
func (v VersionInput) detail(n int) map[string]any {
	return map[string]any{"version": n, "controller": v.Controller, "modelRoute": v.ModelRoute, "effort": v.Effort,
		"tools": v.Tools, "specialists": v.Specialists, "budgets": v.Budgets, "systemPromptBytes": len(v.SystemPrompt)}
}

// list is a list as stored: without repeats, and empty rather than nil.
func list(in []string) []string {
	out := make([]string, 0, len(in))
	for _, x := range in {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func createVersion(ctx context.Context, tx *ent.Tx, agent uuid.UUID, n int, v VersionInput) error {
	v = v.normalised()
	_, err := tx.AgentVersion.Create().SetAgentID(agent).SetVersion(n).SetController(v.Controller).SetModelRoute(v.ModelRoute).
		SetEffort(v.Effort).SetSystemPrompt(v.SystemPrompt).SetTools(v.Tools).SetSpecialists(v.Specialists).SetBudgets(v.Budgets).Save(ctx)
	if pg.IsUniqueViolation(err) {
		return errcode.New(errcode.Conflict, "version %d was written meanwhile; retry", n)
	}
	return err
}

// Agents lists the agents by slug.
func (s *Service) Agents(ctx context.Context, actor authority.Member) ([]*Agent, error) {
	if err := s.require(ctx, actor, PermAgents); err != nil {
		return nil, err
	}
	as, err := s.Client.Agent.Query().Order(ent.Asc(entagent.FieldSlug)).Limit(MaxListLength).
		WithVersions(func(q *ent.AgentVersionQuery) { q.Order(ent.Desc(entversion.FieldVersion)) }).All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Agent, len(as))
	for i, a := range as {
		out[i] = &Agent{ID: a.ID, Slug: a.Slug, Name: a.Name, Versions: a.Edges.Versions}
	}
	return out, nil
}

func (s *Service) agent(ctx context.Context, slug string) (*Agent, error) {
	a, err := s.Client.Agent.Query().Where(entagent.Slug(slug)).
		WithVersions(func(q *ent.AgentVersionQuery) { q.Order(ent.Desc(entversion.FieldVersion)) }).Only(ctx)
	if err != nil {
		return nil, err
	}
	return &Agent{ID: a.ID, Slug: a.Slug, Name: a.Name, Versions: a.Edges.Versions}, nil
}

// SetRoster sets the specialists a member allows an agent to route to
// (their configuration; the effective roster is the version's ∩ this).
// The same list again changes nothing.
func (s *Service) SetRoster(ctx context.Context, actor authority.Member, email, slug string, specialists []string) (*Member, error) {
	if err := s.require(ctx, actor, PermAgents); err != nil {
		return nil, err
	}
	if err := checkSlugs(specialists); err != nil {
		return nil, err
	}
	specialists = list(specialists)
	m, err := s.member(ctx, email)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, func(tx *ent.Tx) error {
		if err := lockActor(ctx, tx, actor, PermAgents); err != nil {
			return err
		}
		a, err := tx.Agent.Query().Where(entagent.Slug(slug)).Only(ctx)
		if ent.IsNotFound(err) {
			return agentNotFound("slug")
		}
		if err != nil {
			return err
		}
		var was []byte
		err = pg.QueryRow(ctx, tx, `SELECT specialists FROM member_agent_configs WHERE member_id = $1 AND agent_id = $2 FOR UPDATE`,
			[]any{m.ID, a.ID}, &was)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("set roster: %w", err)
		}
		var old []string
		if err == nil && json.Unmarshal(was, &old) == nil && old != nil && slices.Equal(old, specialists) {
			return nil
		}
		err = tx.MemberAgentConfig.Create().SetMemberID(m.ID).SetAgentID(a.ID).SetSpecialists(specialists).
			OnConflictColumns(entconfig.FieldMemberID, entconfig.FieldAgentID).UpdateSpecialists().Exec(ctx)
		if err != nil {
			return fmt.Errorf("set roster: %w", err)
		}
		return record(ctx, tx, actor, PermAgents, "set_member_roster", m.Email, map[string]any{"agent": slug, "specialists": specialists})
	})
	if err != nil {
		return nil, err
	}
	return s.memberView(ctx, m.ID)
}
