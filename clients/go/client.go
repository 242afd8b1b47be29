package client

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/google/uuid"
)

// IdentityFunc returns the caller's current identity envelope. fresh is
// true when the server answered UNAUTHENTICATED to the last one: a
// provider that can, refreshes it then.
type IdentityFunc func(ctx context.Context, fresh bool) (string, error)

// Static is an IdentityFunc of one envelope.
func Static(envelope string) IdentityFunc {
	return func(context.Context, bool) (string, error) { return envelope, nil }
}

// RetryPolicy is how reads, subscriptions and keyed mutations retry on
// their own (the browser rule).
type RetryPolicy struct {
	// Window bounds an outage: retries stop once it has lasted this long
	// (default 60 s); a stream is then offline until Retry.
	Window time.Duration
	// Base is the first backoff (default 250 ms); each retry doubles the
	// bound, up to Max (default 5 s). The wait is a random time up to the
	// bound ("full jitter"), and at least the server's RetryAfter.
	Base, Max time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Window <= 0 {
		p.Window = 60 * time.Second
	}
	if p.Base <= 0 {
		p.Base = 250 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	return p
}

// backoff is the wait before retry number attempt (0-based).
func (p RetryPolicy) backoff(attempt int, retryAfter time.Duration) time.Duration {
	bound := p.Base << min(attempt, 20)
	if bound > p.Max || bound <= 0 {
		bound = p.Max
	}
	return max(retryAfter, time.Duration(rand.Int64N(int64(bound)+1)))
}

// Config configures a Client.
type Config struct {
	// URL is the GraphQL endpoint, e.g. http://127.0.0.1:8080/graphql.
	URL string
	// Identity supplies the envelope every request carries in Header.
	Identity IdentityFunc
	// Header is the identity header (default X-Turngate-Identity).
	Header string
	// HTTPClient makes the requests and WebSocket upgrades (default
	// http.DefaultClient).
	HTTPClient *http.Client
	Retry      RetryPolicy
}

// Client speaks turngate's contract with the types genqlient generated
// from schema.graphql (generated.go), with the behaviour every turngate
// client shares (../clients/CONFORMANCE.md): keyed submits and commands
// re-sent only on retryable failures, reads retried under the browser
// rule, room streams that resume forever.
type Client struct {
	cfg Config
	gql graphql.Client

	mu    sync.Mutex
	token string
	have  bool

	pings atomic.Int64
}

// Pings is how many server pings the client's streams have answered.
func (c *Client) Pings() int64 { return c.pings.Load() }

// New returns a client for cfg.
func New(cfg Config) *Client {
	if cfg.Header == "" {
		cfg.Header = "X-Turngate-Identity"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	cfg.Retry = cfg.Retry.withDefaults()
	c := &Client{cfg: cfg}
	c.gql = graphql.NewClient(cfg.URL, doer{c})
	return c
}

// GraphQL is the genqlient client under c, for generated operations the
// methods do not wrap; it sends the identity header and retries nothing.
func (c *Client) GraphQL() graphql.Client { return c.gql }

// identity is the envelope to send: asked once, and again when fresh.
func (c *Client) identity(ctx context.Context, fresh bool) (string, error) {
	c.mu.Lock()
	tok, have := c.token, c.have
	c.mu.Unlock()
	if have && !fresh {
		return tok, nil
	}
	tok, err := c.cfg.Identity(ctx, fresh)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.token, c.have = tok, true
	c.mu.Unlock()
	return tok, nil
}

// doer puts the identity header on genqlient's requests and turns their
// answers into *Error.
type doer struct{ c *Client }

func (d doer) Do(req *http.Request) (*http.Response, error) {
	tok, err := d.c.identity(req.Context(), false)
	if err != nil {
		return nil, err
	}
	req.Header.Set(d.c.cfg.Header, tok)
	res, err := d.c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, &Error{Code: Network, Message: err.Error(), Err: err}
	}
	if res.StatusCode != http.StatusOK && !strings.Contains(res.Header.Get("Content-Type"), "json") {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		res.Body.Close()
		return nil, fromHTTPStatus(res.StatusCode, strings.TrimSpace(string(body)))
	}
	if res.StatusCode != http.StatusOK {
		// A GraphQL answer with a status (gqlgen answers some request
		// errors 422): let genqlient read the errors from the body.
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.StatusCode = http.StatusOK
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	return res, nil
}

// once runs op; on UNAUTHENTICATED it asks Identity again (fresh) and,
// with a new envelope, runs op once more. Every failure is an *Error.
func (c *Client) once(ctx context.Context, op func() error) error {
	sent, err := c.identity(ctx, false)
	if err != nil {
		return err
	}
	err = classifyOrNil(op())
	if CodeOf(err) != Unauthenticated {
		return err
	}
	fresh, ierr := c.identity(ctx, true)
	if ierr != nil || fresh == sent {
		return err
	}
	return classifyOrNil(op())
}

func classifyOrNil(err error) error {
	if err == nil {
		return nil
	}
	return classify(err)
}

// retrying runs op, re-running it after retryable failures with backoff
// until the window since the first failure runs out.
func (c *Client) retrying(ctx context.Context, op func() error) error {
	p := c.cfg.Retry
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, op)
		if err == nil {
			return nil
		}
		e := classify(err)
		left := time.Until(start.Add(p.Window))
		if !e.Retryable() || left <= 0 || ctx.Err() != nil {
			return e
		}
		t := time.NewTimer(min(left, p.backoff(attempt, e.RetryAfter)))
		select {
		case <-ctx.Done():
			t.Stop()
			return e
		case <-t.C:
		}
	}
}

// Query runs a read under the browser rule: network, RATE_LIMITED and
// UNAVAILABLE are retried within the window.
func (c *Client) Query(ctx context.Context, op func(graphql.Client) error) error {
	return c.retrying(ctx, func() error { return op(c.gql) })
}

// Mutate runs a mutation once: without a key it is never re-sent.
func (c *Client) Mutate(ctx context.Context, op func(graphql.Client) error) error {
	return c.once(ctx, func() error { return op(c.gql) })
}

// NewID is a random UUID, for idempotency keys and command ids.
func NewID() string { return uuid.NewString() }

// Me is the member the envelope names.
func (c *Client) Me(ctx context.Context) (*MemberFields, error) {
	var out *MeResponse
	err := c.Query(ctx, func(g graphql.Client) (err error) { out, err = Me(ctx, g); return })
	if err != nil {
		return nil, err
	}
	return &out.Me.MemberFields, nil
}

// Conversations are the caller's rooms, most recently joined first (up to first, at most 100).
func (c *Client) Conversations(ctx context.Context, first int) ([]*ConversationFields, error) {
	var out *ConversationsResponse
	err := c.Query(ctx, func(g graphql.Client) (err error) { out, err = Conversations(ctx, g, &first, nil); return })
	if err != nil {
		return nil, err
	}
	rooms := make([]*ConversationFields, len(out.Conversations.Edges))
	for i, e := range out.Conversations.Edges {
		rooms[i] = &e.Node.ConversationFields
	}
	return rooms, nil
}

// CreateConversation makes a room; it is sent once.
func (c *Client) CreateConversation(ctx context.Context, title string, kind ConversationKind) (*ConversationFields, error) {
	var out *CreateConversationResponse
	err := c.Mutate(ctx, func(g graphql.Client) (err error) {
		out, err = CreateConversation(ctx, g, &CreateConversationInput{Title: title, Kind: kind})
		return
	})
	if err != nil {
		return nil, err
	}
	return &out.CreateConversation.ConversationFields, nil
}

// RenameConversation renames a room (owner only). A rename converges on
// the title it names, so it is safe to re-send.
func (c *Client) RenameConversation(ctx context.Context, id, title string) (*ConversationFields, error) {
	var out *RenameConversationResponse
	err := c.Mutate(ctx, func(g graphql.Client) (err error) {
		out, err = RenameConversation(ctx, g, &RenameConversationInput{ConversationId: id, Title: title})
		return
	})
	if err != nil {
		return nil, err
	}
	return &out.RenameConversation.ConversationFields, nil
}

// AddedMember is a member just added to a shared room, as its owner is
// told of it.
type AddedMember struct {
	// Room is the room with its members now.
	Room *ConversationFields
	// WithheldTurns is how many of the room's earlier turns the new member
	// reads withheld: turns that drew on a document they may not read, and
	// answers withheld from the whole room. Each keeps its place in the
	// journal and reads as the withheld notice (AUDIENCE_WITHHELD).
	WithheldTurns int
}

// AddRoomMember adds a member to a shared room (converges: safe to
// re-send) and says how much of the room's history they read withheld.
func (c *Client) AddRoomMember(ctx context.Context, room, email string) (*AddedMember, error) {
	var out *AddRoomMemberResponse
	err := c.retrying(ctx, func() (err error) {
		out, err = AddRoomMember(ctx, c.gql, &RoomMemberInput{ConversationId: room, Email: email})
		return
	})
	if err != nil {
		return nil, err
	}
	added := &AddedMember{Room: &out.AddRoomMember.ConversationFields}
	// The result lists every member; the server keeps emails trimmed and
	// lowercased (A-Z only).
	want := lowerASCII(strings.TrimSpace(email))
	for _, m := range out.AddRoomMember.Members {
		if m.Member != nil && m.Member.Email == want {
			added.WithheldTurns = m.WithheldTurns
		}
	}
	return added, nil
}

func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// SubmitOptions are a submit's optional parts.
type SubmitOptions struct {
	// IdempotencyKey names the turn; one is made when empty. Retries reuse it.
	IdempotencyKey string
	Specialist     string
	DocumentIDs    []string
	ArtifactIDs    []string
}

// Submit durably submits a message. It re-sends the same idempotency key
// after retryable failures within the retry window, so a retry never
// makes a second turn.
func (c *Client) Submit(ctx context.Context, room, text string, o SubmitOptions) (*TurnFields, error) {
	in := &SubmitMessageInput{ConversationId: room, Text: text, IdempotencyKey: o.IdempotencyKey, DocumentIds: o.DocumentIDs, ArtifactIds: o.ArtifactIDs}
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = NewID()
	}
	if o.Specialist != "" {
		in.Specialist = &o.Specialist
	}
	var out *SubmitMessageResponse
	err := c.retrying(ctx, func() (err error) { out, err = SubmitMessage(ctx, c.gql, in); return })
	if err != nil {
		return nil, err
	}
	return &out.SubmitMessage.TurnFields, nil
}

// Steer sends an instruction to a running turn under commandID (made when
// empty; retries reuse it) and returns the command id and its state.
func (c *Client) Steer(ctx context.Context, turnID, text, commandID string) (string, CommandState, error) {
	if commandID == "" {
		commandID = NewID()
	}
	var out *SteerTurnResponse
	err := c.retrying(ctx, func() (err error) {
		out, err = SteerTurn(ctx, c.gql, &SteerTurnInput{CommandId: commandID, TurnId: turnID, Text: text})
		return
	})
	if err != nil {
		return commandID, "", err
	}
	return commandID, out.SteerTurn.State, nil
}

// Cancel cancels a turn under commandID (made when empty; retries reuse it).
func (c *Client) Cancel(ctx context.Context, turnID, commandID string) (string, *TurnFields, error) {
	if commandID == "" {
		commandID = NewID()
	}
	var out *CancelTurnResponse
	err := c.retrying(ctx, func() (err error) {
		out, err = CancelTurn(ctx, c.gql, &CancelTurnInput{CommandId: commandID, TurnId: turnID})
		return
	})
	if err != nil {
		return commandID, nil, err
	}
	return commandID, &out.CancelTurn.TurnFields, nil
}

// DecideApproval decides an approval; a retry of the same decision converges.
func (c *Client) DecideApproval(ctx context.Context, approvalID string, d ApprovalDecision) (ApprovalState, error) {
	var out *DecideApprovalResponse
	err := c.retrying(ctx, func() (err error) {
		out, err = DecideApproval(ctx, c.gql, &DecideApprovalInput{ApprovalId: approvalID, Decision: d})
		return
	})
	if err != nil {
		return "", err
	}
	return out.DecideApproval.State, nil
}

// Turn is a turn as the server has it now.
func (c *Client) Turn(ctx context.Context, id string) (*TurnTurn, error) {
	var out *TurnResponse
	err := c.Query(ctx, func(g graphql.Client) (err error) { out, err = Turn(ctx, g, id); return })
	if err != nil {
		return nil, err
	}
	return out.Turn, nil
}

// Replay is a turn's model calls in order (its replay for audit), as this
// member may read them: at most first (1 to 200).
func (c *Client) Replay(ctx context.Context, id string, first int) ([]*TurnReplayTurnModelCallsModelCall, error) {
	var out *TurnReplayResponse
	err := c.Query(ctx, func(g graphql.Client) (err error) { out, err = TurnReplay(ctx, g, id, &first); return })
	if err != nil {
		return nil, err
	}
	if out.Turn == nil {
		return nil, nil
	}
	return out.Turn.ModelCalls, nil
}

// Journal reads every entry of a room after a position, by pages.
func (c *Client) Journal(ctx context.Context, room string, after int) ([]*EntryFields, error) {
	var all []*EntryFields
	for {
		var out *JournalResponse
		first := 500
		err := c.Query(ctx, func(g graphql.Client) (err error) { out, err = Journal(ctx, g, room, &after, &first); return })
		if err != nil {
			return nil, err
		}
		for _, e := range out.Journal.Entries {
			all = append(all, &e.EntryFields)
			after = e.Seq
		}
		if !out.Journal.HasMore {
			return all, nil
		}
	}
}
