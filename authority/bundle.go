package authority

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Bundle is a turn's authority: who acts, with which permissions, through
// which exact agent version, in which room and audience, over which
// resources. It is resolved once, when the turn is accepted, stored with the
// turn, and every later callback of the turn presents its Digest; a callback
// presenting anything else is rejected rather than reconciled.
type Bundle struct {
	MemberID       uuid.UUID `json:"memberId"`
	PlatformUserID string    `json:"platformUserId"`
	// Email is the lowercased verified email: the document-ACL principal.
	Email string `json:"email"`
	// DisplayName is a label for the model, flattened to one bounded line.
	// It confers nothing.
	DisplayName      string    `json:"displayName,omitempty"`
	Permissions      []string  `json:"permissions"`
	ConversationID   uuid.UUID `json:"conversationId"`
	ConversationKind string    `json:"conversationKind"`
	// AudienceVersion pins the room's audience for shared rooms; zero for
	// private ones.
	AudienceVersion int64     `json:"audienceVersion,omitempty"`
	AgentID         uuid.UUID `json:"agentId"`
	AgentVersionID  uuid.UUID `json:"agentVersionId"`
	AgentVersion    int       `json:"agentVersion"`
	Controller      string    `json:"controller"`
	ModelRoute      string    `json:"modelRoute"`
	// Specialist is the one-turn specialist route, when one was chosen:
	// the agent fields above then name the specialist's version.
	Specialist string `json:"specialist,omitempty"`
	// Roster is the effective roster: the agent version's specialists ∩
	// the member's configured ones. A specialist route, or a delegation,
	// names one of these or nothing.
	Roster []string `json:"roster,omitempty"`
	// Manifest pins the exact resources the turn may see.
	Manifest Manifest `json:"manifest"`
}

// Manifest is the pinned resource manifest of a turn: the exact documents
// and artifacts it may see. Documents, when listed, are the member's
// explicit selection; otherwise the turn may see the documents that
// existed when it was accepted (DocumentsBefore). Either way a document's
// ACL must hold the member's email at the moment it is read.
type Manifest struct {
	Documents       []uuid.UUID `json:"documents"`
	DocumentsBefore *time.Time  `json:"documentsBefore,omitempty"`
	Artifacts       []uuid.UUID `json:"artifacts"`
}

// Digest is the SHA-256 of the bundle's canonical JSON encoding.
func (b Bundle) Digest() (string, json.RawMessage, error) {
	if b.Permissions == nil {
		b.Permissions = []string{}
	}
	if b.Manifest.Documents == nil {
		b.Manifest.Documents = []uuid.UUID{}
	}
	if b.Manifest.Artifacts == nil {
		b.Manifest.Artifacts = []uuid.UUID{}
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return "", nil, fmt.Errorf("encode authority bundle: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), raw, nil
}
