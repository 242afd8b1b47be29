package room

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entagent "github.com/turngate/turngate/ent/agent"
	entconv "github.com/turngate/turngate/ent/conversation"
	entmember "github.com/turngate/turngate/ent/member"
	"github.com/turngate/turngate/ent/roommember"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/resource"
)

// DefaultAgent is the slug of the agent a conversation gets when none is named.
const DefaultAgent = "assistant"

// Service manages rooms.
type Service struct {
	Client *ent.Client
	Hub    *journal.Hub
	// Metrics counts the turns a removal ends; nil counts nothing.
	Metrics *metrics.Metrics
}

// MemberPayload is the payload of member_joined and member_left entries.
type MemberPayload struct {
	MemberID        uuid.UUID `json:"memberId"`
	AudienceVersion int64     `json:"audienceVersion"`
}

// NewInput describes a conversation to create.
type NewInput struct {
	Title     string
	Kind      entconv.Kind
	AgentSlug string
}

// Create makes a conversation owned by owner, with owner as its first
// member.
func (s *Service) Create(ctx context.Context, owner authority.Member, in NewInput) (*ent.Conversation, error) {
	slug := in.AgentSlug
	if slug == "" {
		slug = DefaultAgent
	}
	ag, err := s.Client.Agent.Query().Where(entagent.Slug(slug)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errcode.Invalid("agent", "no agent has that slug")
	}
	if err != nil {
		return nil, fmt.Errorf("create conversation: agent: %w", err)
	}
	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	id := uuid.New()
	c, err := tx.Conversation.Create().
		SetID(id).
		SetPublicKey(NewPublicKey()).
		SetChannel(Channel(id)).
		SetTitle(in.Title).
		SetKind(in.Kind).
		SetOwnerID(owner.ID).
		SetAgentID(ag.ID).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("create conversation: %w", err)
	}
	if _, err := tx.RoomMember.Create().SetConversationID(id).SetMemberID(owner.ID).SetRole(roommember.RoleOwner).Save(ctx); err != nil {
		return nil, fmt.Errorf("create conversation: owner membership: %w", err)
	}
	entries, err := journal.Append(ctx, tx, id, nil, journal.Draft{
		Kind: journal.KindMemberJoined, ActorID: uuid.NullUUID{UUID: owner.ID, Valid: true},
		Payload: MemberPayload{MemberID: owner.ID, AudienceVersion: c.AudienceVersion},
	})
	if err != nil {
		return nil, fmt.Errorf("create conversation: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("create conversation: commit: %w", err)
	}
	s.Hub.Committed(id, entries[0].Seq)
	c.NextSeq = entries[0].Seq
	return c, nil
}

// Channel is the WEB_ channel name of a room.
func Channel(id uuid.UUID) string {
	return "WEB_" + strings.ReplaceAll(id.String(), "-", "")
}

// NewPublicKey returns a fresh public conversation key.
func NewPublicKey() string {
	var b [15]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return "conv_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Get returns the room ref names, if viewer is a member of it. A room the
// viewer cannot see is NOT_FOUND, exactly like a room that does not exist.
func (s *Service) Get(ctx context.Context, viewer authority.Member, ref string) (*ent.Conversation, error) {
	id, err := authority.ResolveScope(ctx, s.Client, ref)
	if err != nil {
		return nil, err
	}
	return s.GetByID(ctx, viewer, id)
}

// GetByID is Get for a room UUID.
func (s *Service) GetByID(ctx context.Context, viewer authority.Member, id uuid.UUID) (*ent.Conversation, error) {
	c, err := s.Client.Conversation.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, errcode.New(errcode.NotFound, "conversation not found")
	}
	if err != nil {
		return nil, fmt.Errorf("get conversation %s: %w", id, err)
	}
	// A room exists only for its current members.
	in, err := authority.IsMember(ctx, s.Client, id, viewer.ID)
	if err != nil {
		return nil, err
	}
	if !in {
		return nil, errcode.New(errcode.NotFound, "conversation not found")
	}
	return c, nil
}

// IsMember reports whether member is in room now.
func (s *Service) IsMember(ctx context.Context, roomID, memberID uuid.UUID) (bool, error) {
	return authority.IsMember(ctx, s.Client, roomID, memberID)
}

// Membership is one room a member is in.
type Membership struct {
	Conversation *ent.Conversation
	Cursor       string
}

// List returns up to first rooms viewer is in, most recently joined first,
// after the cursor.
func (s *Service) List(ctx context.Context, viewer authority.Member, first int, after string) ([]Membership, bool, error) {
	q := s.Client.RoomMember.Query().Where(roommember.MemberID(viewer.ID))
	if after != "" {
		at, id, err := decodeCursor(after)
		if err != nil {
			return nil, false, err
		}
		q = q.Where(roommember.Or(
			roommember.CreatedAtLT(at),
			roommember.And(roommember.CreatedAt(at), roommember.IDLT(id)),
		))
	}
	rms, err := q.Order(ent.Desc(roommember.FieldCreatedAt), ent.Desc(roommember.FieldID)).
		Limit(first + 1).
		WithConversation().
		All(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("list conversations: %w", err)
	}
	more := len(rms) > first
	if more {
		rms = rms[:first]
	}
	out := make([]Membership, len(rms))
	for i, rm := range rms {
		out[i] = Membership{Conversation: rm.Edges.Conversation, Cursor: encodeCursor(rm.CreatedAt, rm.ID)}
	}
	return out, more, nil
}

// encodeCursor is the opaque conversations cursor of a membership: its
// join time and id, the keys List orders by.
func encodeCursor(at time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id.String()))
}

// malformedCursor is every decodeCursor failure: the client's to fix,
// with no detail of the cursor's layout.
func malformedCursor() error { return errcode.Invalid("after", "malformed cursor") }

// decodeCursor reads a cursor made by encodeCursor, and only one spelled
// exactly as encodeCursor spells it: base64, RFC 3339 and UUID parsing
// each accept other spellings of the same position (line breaks, a zone
// offset, trailing zeros, upper case, braces), and an opaque cursor has
// one. Every failure is a BAD_USER_INPUT error on "after".
func decodeCursor(s string) (time.Time, uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, uuid.Nil, malformedCursor()
	}
	ts, ids, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, uuid.Nil, malformedCursor()
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, malformedCursor()
	}
	id, err := uuid.Parse(ids)
	if err != nil || encodeCursor(at, id) != s {
		return time.Time{}, uuid.Nil, malformedCursor()
	}
	return at, id, nil
}

// Members returns a room's memberships with their members.
func (s *Service) Members(ctx context.Context, roomID uuid.UUID) ([]*ent.RoomMember, error) {
	return s.Client.RoomMember.Query().Where(roommember.ConversationID(roomID)).
		Order(ent.Asc(roommember.FieldCreatedAt)).WithMember().All(ctx)
}

// bumpAudience locks the room, checks that actor owns it and that it is
// shared, and bumps its audience version.
const bumpAudience = `
UPDATE conversations SET audience_version = audience_version + 1
WHERE id = $1 AND owner_id = $2 AND kind = 'shared'
RETURNING audience_version`

// Rename gives the room ref names a new title; only its owner may. The
// owner is checked again in the update itself, so a rename never lands
// on a room whose owner changed in between.
func (s *Service) Rename(ctx context.Context, actor authority.Member, ref, title string) (*ent.Conversation, error) {
	c, err := s.Get(ctx, actor, ref)
	if err != nil {
		return nil, err
	}
	if c.OwnerID != actor.ID {
		return nil, errcode.New(errcode.Forbidden, "only the conversation's owner may rename it")
	}
	n, err := s.Client.Conversation.Update().
		Where(entconv.ID(c.ID), entconv.OwnerID(actor.ID)).
		SetTitle(title).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("rename conversation %s: %w", c.ID, err)
	}
	if n == 0 {
		return nil, errcode.New(errcode.Forbidden, "only the conversation's owner may rename it")
	}
	c.Title = title
	return c, nil
}

// AddMember adds the member with email to a shared room; only its owner
// may. Adding a member who is already in the room changes nothing.
func (s *Service) AddMember(ctx context.Context, actor authority.Member, ref, email string) (*ent.Conversation, error) {
	return s.changeMembership(ctx, actor, ref, email, true)
}

// RemoveMember removes the member with email from a shared room; only its
// owner may, and the owner cannot be removed.
func (s *Service) RemoveMember(ctx context.Context, actor authority.Member, ref, email string) (*ent.Conversation, error) {
	return s.changeMembership(ctx, actor, ref, email, false)
}

func (s *Service) changeMembership(ctx context.Context, actor authority.Member, ref, email string, add bool) (*ent.Conversation, error) {
	c, err := s.Get(ctx, actor, ref)
	if err != nil {
		return nil, err
	}
	if c.OwnerID != actor.ID {
		return nil, errcode.New(errcode.Forbidden, "only the conversation's owner may change its members")
	}
	if c.Kind != entconv.KindShared {
		return nil, errcode.Invalid("conversationId", "a private conversation has no other members")
	}
	target, err := s.Client.Member.Query().Where(entmember.Email(authority.LowerASCII(strings.TrimSpace(email)))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, &errcode.Error{Code: errcode.NotFound, Field: "email", Message: "no member has that email: a member exists once they have signed in"}
	}
	if err != nil {
		return nil, fmt.Errorf("change membership: %w", err)
	}
	if !add && target.ID == c.OwnerID {
		return nil, errcode.Invalid("email", "the owner cannot be removed from the conversation")
	}

	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	revoke := lease.RevokeParams{Room: c.ID, Author: target.ID}
	if !add {
		// The removed member's turns end with the removal: their rows
		// are locked first, as the lock order has it.
		if err := s.leases().LockAuthorTurns(ctx, tx, revoke); err != nil {
			return nil, fmt.Errorf("remove member: %w", err)
		}
	}
	rows, err := tx.QueryContext(ctx, bumpAudience, c.ID, actor.ID)
	if err != nil {
		return nil, fmt.Errorf("change membership: %w", err)
	}
	var audience int64
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&audience); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if !found {
		return nil, errcode.New(errcode.Forbidden, "only the conversation's owner may change its members")
	}
	var n int64
	kind := journal.KindMemberJoined
	if add {
		res, err := tx.ExecContext(ctx, `INSERT INTO room_members (id, conversation_id, member_id, role) VALUES ($1, $2, $3, 'member')
ON CONFLICT (conversation_id, member_id) DO NOTHING`, uuid.New(), c.ID, target.ID)
		if err != nil {
			return nil, fmt.Errorf("add member: %w", err)
		}
		n, _ = res.RowsAffected()
	} else {
		kind = journal.KindMemberLeft
		res, err := tx.ExecContext(ctx, `DELETE FROM room_members WHERE conversation_id = $1 AND member_id = $2`, c.ID, target.ID)
		if err != nil {
			return nil, fmt.Errorf("remove member: %w", err)
		}
		n, _ = res.RowsAffected()
	}
	if n == 0 {
		// Already so: nothing changes, the audience version included.
		return c, nil
	}
	if add && c.Kind == entconv.KindShared {
		// Invitation-time reconciliation: files the newcomer made in this
		// room's turns (while in it before) become room references again.
		if _, err := resource.LinkToRoom(ctx, tx, c.ID.String(), nil); err != nil {
			return nil, fmt.Errorf("add member: %w", err)
		}
	}
	entries, err := journal.Append(ctx, tx, c.ID, nil, journal.Draft{
		Kind: kind, ActorID: uuid.NullUUID{UUID: actor.ID, Valid: true},
		Payload: MemberPayload{MemberID: target.ID, AudienceVersion: audience},
	})
	if err != nil {
		return nil, fmt.Errorf("change membership: %w", err)
	}
	head := entries[0].Seq
	revoked := 0
	if !add {
		// After member_left, the terminals of the removed member's turns:
		// nothing else of them can be appended once this commits.
		last, n, err := s.leases().Revoke(ctx, tx, revoke)
		if err != nil {
			return nil, fmt.Errorf("remove member: %w", err)
		}
		head, revoked = max(head, last), n
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("change membership: commit: %w", err)
	}
	s.leases().Revoked(revoked)
	s.Hub.Committed(c.ID, head)
	c.AudienceVersion = audience
	c.NextSeq = entries[0].Seq
	return c, nil
}

// leases is the lease store over the service's handles: a removal ends
// the removed member's turns through it.
func (s *Service) leases() *lease.Store {
	return lease.NewStore(s.Client, s.Hub).WithMetrics(s.Metrics)
}

// ResolveScope resolves any scope form naming a room to its id
// (authority.ResolveScope).
func (s *Service) ResolveScope(ctx context.Context, scope string) (uuid.UUID, error) {
	return authority.ResolveScope(ctx, s.Client, scope)
}
