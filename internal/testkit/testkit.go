package testkit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/ent"
	entagentversion "github.com/turngate/turngate/ent/agentversion"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/turn"
)

// Env is one test's world.
type Env struct {
	URL     string
	DB      *sql.DB
	Client  *ent.Client
	Hub     *journal.Hub
	Members *authority.Members
	Rooms   *room.Service
	Turns   *turn.Service

	Alice, Bob authority.Member
	// Shared is the demo room both Alice and Bob are in.
	Shared *ent.Conversation
}

// New returns a fresh world; everything it started stops at test cleanup.
func New(t testing.TB) *Env {
	t.Helper()
	ctx := context.Background()
	db, url := dbtest.OpenDB(t)
	db.SetMaxOpenConns(40)
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, db)))
	hub := journal.NewHub(journal.HubConfig{DB: db, ListenURL: url, Poll: 500 * time.Millisecond})
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Stop)
	e := &Env{
		URL: url, DB: db, Client: client, Hub: hub,
		Members: &authority.Members{Client: client},
		Rooms:   &room.Service{Client: client, Hub: hub},
		Turns:   &turn.Service{Client: client, DB: db, Hub: hub},
	}
	if err := demo.Seed(ctx, client, e.Rooms, e.Members); err != nil {
		t.Fatalf("seed demo: %v", err)
	}
	e.Alice = e.Member(t, demo.People[0].Email)
	e.Bob = e.Member(t, demo.People[1].Email)
	shared, err := demo.TeamRoom(ctx, client)
	if err != nil {
		t.Fatalf("demo shared room: %v", err)
	}
	e.Shared = shared
	return e
}

// Member returns the demo member with email.
func (e *Env) Member(t testing.TB, email string) authority.Member {
	t.Helper()
	for _, p := range demo.People {
		if p.Email == email {
			m, err := e.Members.Ensure(context.Background(), authority.Identity{Subject: authority.DevSubject(email), Email: email, DisplayName: p.Name})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no demo member %s", email)
	return authority.Member{}
}

// NewMember makes a member who is in no room.
func (e *Env) NewMember(t testing.TB, email string) authority.Member {
	t.Helper()
	m, err := e.Members.Ensure(context.Background(), authority.Identity{Subject: "test|" + email, Email: email, DisplayName: "Mallory"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Runner starts a runner on the world with the builtin model (or the
// providers given), stopped at cleanup.
func (e *Env) Runner(t testing.TB, cfg runner.Config) *runner.Runner {
	t.Helper()
	cfg.Client, cfg.Hub = e.Client, e.Hub
	if cfg.Gateway == nil {
		cfg.Gateway = gateway.New(map[string]gateway.Provider{"builtin": gateway.Builtin{}})
	}
	if cfg.Poll == 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	r := runner.New(cfg)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Submit submits text as member into room with a fresh key.
func (e *Env) Submit(t testing.TB, m authority.Member, room uuid.UUID, text string) *ent.Turn {
	t.Helper()
	tt, err := e.Turns.Submit(context.Background(), turn.Submission{Member: m, ConversationID: room, Text: text, IdempotencyKey: uuid.NewString()})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return tt
}

// WaitTerminal waits, up to a deadline, until the turn has a terminal
// state, and returns it. It waits on the journal, not on a clock.
func (e *Env) WaitTerminal(t testing.TB, id uuid.UUID) *ent.Turn {
	t.Helper()
	return e.WaitTurn(t, id, func(tt *ent.Turn) bool {
		return tt.State != "queued" && tt.State != "running"
	})
}

// WaitTurn waits, up to a deadline, until cond holds for the turn.
func (e *Env) WaitTurn(t testing.TB, id uuid.UUID, cond func(*ent.Turn) bool) *ent.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		tt, err := e.Client.Turn.Get(ctx, id)
		if err != nil {
			t.Fatalf("wait for turn %s: %v", id, err)
		}
		if cond(tt) {
			return tt
		}
		wake := e.Hub.Wait(tt.ConversationID)
		// Re-read once more after taking the wake-up, so a commit between
		// the read and the wait is not missed.
		if tt, err = e.Client.Turn.Get(ctx, id); err == nil && cond(tt) {
			return tt
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("turn %s: condition not met before the deadline (state %s)", id, tt.State)
		}
	}
}

// Entries returns every journal entry of room.
func (e *Env) Entries(t testing.TB, room uuid.UUID) []journal.Entry {
	t.Helper()
	entries, err := journal.Read(context.Background(), e.DB, room, 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// Private returns m's private demo room.
func (e *Env) Private(t testing.TB, m authority.Member) *ent.Conversation {
	t.Helper()
	c, err := e.Client.Conversation.Query().Where(entconv.OwnerID(m.ID), entconv.KindEQ(entconv.KindPrivate)).First(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Agent publishes the next version of the demo rooms' agent, with the
// given controller, tools and budgets; turns accepted after it use it.
// No tools and no budgets are stored as an empty list and object: the
// database holds a version's lists to be arrays (agent_versions_lists).
func (e *Env) Agent(t testing.TB, controller string, tools []string, budgets map[string]int64) *ent.AgentVersion {
	t.Helper()
	ctx := context.Background()
	if tools == nil {
		tools = []string{}
	}
	if budgets == nil {
		budgets = map[string]int64{}
	}
	latest, err := e.Client.AgentVersion.Query().
		Where(entagentversion.AgentID(e.Shared.AgentID)).
		Order(ent.Desc(entagentversion.FieldVersion)).First(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Stored lists are arrays and budgets an object, never JSON null (a
	// check on agent_versions holds it).
	if tools == nil {
		tools = []string{}
	}
	if budgets == nil {
		budgets = map[string]int64{}
	}
	av, err := e.Client.AgentVersion.Create().
		SetAgentID(latest.AgentID).SetVersion(latest.Version + 1).
		SetController(controller).SetModelRoute(latest.ModelRoute).SetEffort(latest.Effort).
		SetSystemPrompt(latest.SystemPrompt).SetTools(tools).SetBudgets(budgets).
		Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return av
}

// HexSHA is the lowercase hex sha256 of b, as artifacts store it.
func HexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TamperArtifact rewrites an artifact's stored content behind the
// immutability trigger, in the test's own database: what a corrupted disk
// or a rogue writer would leave. The new content must keep the size.
func (e *Env) TamperArtifact(t testing.TB, id uuid.UUID, content []byte) {
	t.Helper()
	tx, err := e.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range []struct {
		q    string
		args []any
	}{
		{`ALTER TABLE artifacts DISABLE TRIGGER artifacts_immutable`, nil},
		{`UPDATE artifacts SET content = $2 WHERE id = $1`, []any{id, content}},
		{`ALTER TABLE artifacts ENABLE TRIGGER artifacts_immutable`, nil},
	} {
		if _, err := tx.Exec(stmt.q, stmt.args...); err != nil {
			t.Fatalf("tamper: %s: %v", stmt.q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// AddRoomReference makes an artifact part of a room, as a settled tool
// does, with the given digest.
func (e *Env) AddRoomReference(t testing.TB, room, artifact uuid.UUID, digest string) {
	t.Helper()
	if _, err := e.DB.Exec(`INSERT INTO room_resources (id, conversation_id, artifact_id, digest) VALUES ($1, $2, $3, $4)`,
		uuid.New(), room, artifact, digest); err != nil {
		t.Fatal(err)
	}
}
