package authority

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/ent"
	entmember "github.com/turngate/turngate/ent/member"
	"github.com/turngate/turngate/errcode"
)

// Member is the resolved caller: the platform user an envelope names, as
// turngate knows them.
type Member struct {
	ID             uuid.UUID
	PlatformUserID string
	// Email is lowercased and verified: the document-ACL principal.
	Email       string
	DisplayName string
}

// Members finds or creates the member an identity names.
type Members struct {
	Client *ent.Client

	// known remembers identities already written as they are: a member's
	// id never changes, and a row holding exactly the envelope's email and
	// name needs no write. Permissions and memberships are never cached,
	// here or anywhere: every replica reads them from the database at each
	// use, so a change made through one holds on all at the next read.
	mu    sync.Mutex
	known map[Identity]Member
	// current is the identity last written for each subject: when a
	// member's email or name changes, the old form leaves the cache.
	current map[string]Identity
}

// maxKnown bounds the identity cache; it is simply emptied when full.
const maxKnown = 10000

const upsertMember = `
INSERT INTO members (id, platform_user_id, email, display_name) VALUES ($1, $2, $3, $4)
ON CONFLICT (platform_user_id) DO UPDATE SET email = EXCLUDED.email, display_name = EXCLUDED.display_name
RETURNING id`

// Current returns the member the request's verified identity names,
// creating it on first sight (found by platform user id; email and display
// name follow the envelope). Without a valid envelope it returns an
// UNAUTHENTICATED error with the precise reason.
func (m *Members) Current(ctx context.Context) (Member, error) {
	id, err := RequireIdentity(ctx)
	if err != nil {
		return Member{}, err
	}
	return m.Ensure(ctx, id)
}

// Ensure finds or creates the member for a verified identity.
func (m *Members) Ensure(ctx context.Context, id Identity) (Member, error) {
	m.mu.Lock()
	known, ok := m.known[id]
	m.mu.Unlock()
	if ok {
		return known, nil
	}
	got, err := m.ensure(ctx, id)
	if err != nil {
		return Member{}, err
	}
	m.mu.Lock()
	if m.known == nil || len(m.known) >= maxKnown {
		m.known = make(map[Identity]Member)
		m.current = make(map[string]Identity)
	}
	if old, ok := m.current[id.Subject]; ok {
		delete(m.known, old)
	}
	m.known[id] = got
	m.current[id.Subject] = id
	m.mu.Unlock()
	return got, nil
}

func (m *Members) ensure(ctx context.Context, id Identity) (Member, error) {
	// Most requests come from a member already known with the same email
	// and name: one read answers them.
	got, err := m.Client.Member.Query().Where(entmember.PlatformUserID(id.Subject)).Only(ctx)
	switch {
	case err == nil && got.Email == id.Email && got.DisplayName == id.DisplayName:
		return Member{ID: got.ID, PlatformUserID: got.PlatformUserID, Email: got.Email, DisplayName: got.DisplayName}, nil
	case err != nil && !ent.IsNotFound(err):
		return Member{}, fmt.Errorf("find member: %w", err)
	}
	rows, err := m.Client.QueryContext(ctx, upsertMember, uuid.New(), id.Subject, id.Email, id.DisplayName)
	if err != nil {
		return Member{}, m.upsertError(err)
	}
	defer rows.Close()
	var mid uuid.UUID
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Member{}, m.upsertError(err)
		}
		return Member{}, errors.New("upsert member returned no row")
	}
	if err := rows.Scan(&mid); err != nil {
		return Member{}, err
	}
	return Member{ID: mid, PlatformUserID: id.Subject, Email: id.Email, DisplayName: id.DisplayName}, nil
}

func (m *Members) upsertError(err error) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		return errcode.New(errcode.Conflict, "the envelope's email belongs to another member")
	}
	return fmt.Errorf("upsert member: %w", err)
}

// Get returns the member with id.
func (m *Members) Get(ctx context.Context, id uuid.UUID) (*ent.Member, error) {
	return m.Client.Member.Get(ctx, id)
}
