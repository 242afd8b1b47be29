package model

import (
	"encoding/json"
	"time"
)

// Conversation, Turn and RoomMember are written by hand so that they carry
// the ids their relation resolvers need (owner, active turn, author,
// member) without exposing them as fields of the contract.

type Conversation struct {
	ID              string           `json:"id"`
	PublicKey       string           `json:"publicKey"`
	Channel         string           `json:"channel"`
	Title           string           `json:"title"`
	Kind            ConversationKind `json:"kind"`
	AudienceVersion int64            `json:"audienceVersion"`
	Head            int64            `json:"head"`
	CreatedAt       time.Time        `json:"createdAt"`

	OwnerID      string  `json:"-"`
	ActiveTurnID *string `json:"-"`
}

type Turn struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversationId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	Position       int64     `json:"position"`
	State          TurnState `json:"state"`
	Input          string    `json:"input"`
	Answer         *string   `json:"answer,omitempty"`
	Attempt        int64     `json:"attempt"`
	TerminalReason *string   `json:"terminalReason,omitempty"`
	// Terminal is how the turn ended; nil until it has.
	Terminal   *TurnTerminal `json:"terminal,omitempty"`
	CreatedAt  time.Time     `json:"createdAt"`
	StartedAt  *time.Time    `json:"startedAt,omitempty"`
	FinishedAt *time.Time    `json:"finishedAt,omitempty"`

	AuthorID string `json:"-"`
	// UsageJSON is the turn's settled usage column, decoded by the usage
	// resolver; nil while the turn has not ended.
	UsageJSON json.RawMessage `json:"-"`
}

type RoomMember struct {
	ID       string    `json:"id"`
	Member   *Member   `json:"member"`
	Role     RoomRole  `json:"role"`
	JoinedAt time.Time `json:"joinedAt"`

	// ConversationID is the room, for withheldTurns.
	ConversationID string `json:"-"`
}

// AdminEvent carries its actor's id; the actor is resolved when asked for.
type AdminEvent struct {
	ID      string    `json:"id"`
	Area    AdminArea `json:"area"`
	Action  string    `json:"action"`
	Subject string    `json:"subject"`
	Detail  JSON      `json:"detail"`
	At      time.Time `json:"at"`

	ActorID string `json:"-"`
}

// Artifact carries an artifact's record; its text is resolved (and
// re-authorised) only when asked for.
type Artifact struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	MediaType   string `json:"mediaType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	DownloadURL string `json:"downloadUrl"`
}

// The hand-written models that implement the contract's Node interface
// (gqlgen writes these markers for the models it generates).

func (Conversation) IsNode() {}
func (Turn) IsNode()         {}
func (RoomMember) IsNode()   {}
func (Artifact) IsNode()     {}
