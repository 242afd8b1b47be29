package graph

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/model"
)

// Global ids. Query.node(id) reads any Node again by the id its own id
// field gave, so no id a client already holds changes: ids are not
// re-encoded with their type (Relay's base64 "Type:id") because every
// client, the web app and stored links use the bare ones. Their shapes
// tell the tables apart:
//
//   - <uuid>:<seq>     a journal entry
//   - <uuid>:<uuid>    a room member (<conversation id>:<member id>)
//   - <uuid>           a conversation, a turn, an approval or an artifact:
//     random UUIDs, unique across those tables, so the reads are tried in
//     turn and at most one finds it.
//
// Each read is the type's own authorised read, so a viewer who may not
// read an object meets the same NOT_FOUND as for one that does not exist;
// the resolver answers null for both (no existence oracle). Only the
// canonical spelling of an id matches, so node(id).id is always id.

// errNoNode is what node returns for an id that names nothing the viewer
// may read: the NOT_FOUND every per-type read returns for it.
var errNoNode = errcode.New(errcode.NotFound, "not found")

// node reads the object id names, as viewer may read it now.
func (r *Resolver) node(ctx context.Context, viewer authority.Member, id string) (model.Node, error) {
	if head, tail, ok := strings.Cut(id, ":"); ok {
		room, ok := canonicalUUID(head)
		if !ok {
			return nil, errNoNode
		}
		if seq, err := strconv.ParseInt(tail, 10, 64); err == nil && strconv.FormatInt(seq, 10) == tail {
			return r.entryNode(ctx, viewer, room, seq)
		}
		if member, ok := canonicalUUID(tail); ok {
			return r.roomMemberNode(ctx, viewer, room, member)
		}
		return nil, errNoNode
	}
	uid, ok := canonicalUUID(id)
	if !ok {
		return nil, errNoNode
	}
	for _, read := range []func(context.Context, authority.Member, uuid.UUID) (model.Node, error){
		r.conversationNode, r.turnNode, r.approvalNode, r.artifactNode,
	} {
		n, err := read(ctx, viewer, uid)
		if errors.Is(err, errcode.ErrNotFound) {
			continue
		}
		return n, err
	}
	return nil, errNoNode
}

// canonicalUUID parses s when it is a UUID spelled as this server spells
// ids (lowercase, hyphenated).
func canonicalUUID(s string) (uuid.UUID, bool) {
	u, err := uuid.Parse(s)
	return u, err == nil && u.String() == s
}

func (r *Resolver) conversationNode(ctx context.Context, viewer authority.Member, id uuid.UUID) (model.Node, error) {
	c, err := r.Rooms.GetByID(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	return toConversation(c), nil
}

func (r *Resolver) turnNode(ctx context.Context, viewer authority.Member, id uuid.UUID) (model.Node, error) {
	t, err := r.Turns.Visible(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	return r.turnFor(ctx, viewer, t)
}

// approvalNode reads an approval as Turn.approvals shows it: to whoever
// may see its turn, its arguments blanked when the turn is withheld from
// them.
func (r *Resolver) approvalNode(ctx context.Context, viewer authority.Member, id uuid.UUID) (model.Node, error) {
	a, t, err := r.Turns.VisibleApproval(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	rd, err := r.Feed.Read(ctx, viewer, t.ConversationID, t.ID, nil)
	if err != nil {
		return nil, err
	}
	return approvalFor(a, time.Now(), rd.Withheld()), nil
}

func (r *Resolver) artifactNode(ctx context.Context, viewer authority.Member, id uuid.UUID) (model.Node, error) {
	ref, err := r.Resources.Stat(ctx, viewer.ID, id)
	if err != nil {
		return nil, artifactError(err)
	}
	return toArtifact(ref), nil
}

// entryNode reads one journal entry as the journal query pages it: to a
// current member of its room, as they may read it now (feed).
func (r *Resolver) entryNode(ctx context.Context, viewer authority.Member, room uuid.UUID, seq int64) (model.Node, error) {
	if seq < 1 {
		return nil, errNoNode
	}
	if _, err := r.Rooms.GetByID(ctx, viewer, room); err != nil {
		return nil, err
	}
	entries, err := r.Feed.Page(ctx, viewer, room, seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 || entries[0].Seq != seq {
		return nil, errNoNode
	}
	return toEntry(entries[0]), nil
}

// roomMemberNode reads a member's place in a room as Conversation.members
// lists it: to a current member of the room, while the member is in it.
func (r *Resolver) roomMemberNode(ctx context.Context, viewer authority.Member, room, member uuid.UUID) (model.Node, error) {
	c, err := r.Rooms.GetByID(ctx, viewer, room)
	if err != nil {
		return nil, err
	}
	rms, err := r.Rooms.Members(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, rm := range rms {
		if rm.MemberID == member {
			return toRoomMember(c.ID.String(), rm), nil
		}
	}
	return nil, errNoNode
}
