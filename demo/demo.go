package demo

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entagent "github.com/turngate/turngate/ent/agent"
	entagentversion "github.com/turngate/turngate/ent/agentversion"
	entconv "github.com/turngate/turngate/ent/conversation"
	entmember "github.com/turngate/turngate/ent/member"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/tools"
)

// Person is a member of the demo data set.
type Person struct {
	Email, Name string
	Permissions []string
}

// People are the demo members.
var People = []Person{
	// Alice also operates the demo: she holds every admin permission.
	{Email: "alice@example.com", Name: "Alice", Permissions: []string{"documents.read", "tasks.write", "admin:documents", "admin:members", "admin:agents"}},
	{Email: "bob@example.com", Name: "Bob", Permissions: []string{"documents.read"}},
}

// Seed writes the demo data set once: the two demo members, the default
// agent with one version, a shared room with both members, a private room
// each, and documents with ACLs. Running it again changes nothing.
func Seed(ctx context.Context, client *ent.Client, rooms *room.Service, members *authority.Members) error {
	if err := SeedAgent(ctx, client); err != nil {
		return err
	}
	var ms []authority.Member
	for _, d := range People {
		m, err := members.Ensure(ctx, authority.Identity{Subject: authority.DevSubject(d.Email), Email: d.Email, DisplayName: d.Name})
		if err != nil {
			return fmt.Errorf("seed member %s: %w", d.Email, err)
		}
		for _, p := range d.Permissions {
			if _, err := client.ExecContext(ctx, `INSERT INTO member_permissions (id, member_id, permission) VALUES ($1, $2, $3)
ON CONFLICT (member_id, permission) DO NOTHING`, uuid.New(), m.ID, p); err != nil {
				return fmt.Errorf("seed permission: %w", err)
			}
		}
		ms = append(ms, m)
	}
	alice, bob := ms[0], ms[1]
	if _, err := client.ExecContext(ctx, `INSERT INTO member_agent_configs (id, member_id, agent_id, specialists)
SELECT $1, $2, a.id, $3 FROM agents a WHERE a.slug = $4
ON CONFLICT (member_id, agent_id) DO NOTHING`, uuid.New(), alice.ID, `["`+Researcher+`"]`, room.DefaultAgent); err != nil {
		return fmt.Errorf("seed roster: %w", err)
	}
	// The demo rooms are seeded once: their presence says so.
	n, err := client.Conversation.Query().Where(entconv.OwnerID(alice.ID)).Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	shared, err := rooms.Create(ctx, alice, room.NewInput{Title: TeamRoomTitle, Kind: entconv.KindShared})
	if err != nil {
		return fmt.Errorf("seed shared room: %w", err)
	}
	if _, err := rooms.AddMember(ctx, alice, shared.ID.String(), bob.Email); err != nil {
		return fmt.Errorf("seed shared room: %w", err)
	}
	for _, m := range ms {
		if _, err := rooms.Create(ctx, m, room.NewInput{Title: m.DisplayName + "'s notes", Kind: entconv.KindPrivate}); err != nil {
			return fmt.Errorf("seed private room: %w", err)
		}
	}
	return seedDocuments(ctx, client)
}

// Documents are the demo documents: who may read each is its ACL.
var Documents = []resource.Document{
	{
		Title:   "Launch plan",
		Readers: []string{"alice@example.com", "bob@example.com"},
		Body: "The public launch of turngate moves to Friday 11 December 2026, at 10:00 UTC.\n\n" +
			"Before the launch the team freezes the schema on Monday 7 December and runs the long chaos round every night.\n\n" +
			"Alice owns the announcement; Bob owns the migration runbook and the on-call rota for launch week.",
	},
	{
		Title:   "Security policy",
		Readers: []string{"alice@example.com", "bob@example.com"},
		Body: "Signing keys are rotated every 90 days; the old key stays trusted for 7 days after a rotation.\n\n" +
			"Identity envelopes expire after one hour. A member's permissions are read again on every tool call.",
	},
	{
		Title:   "Compensation bands 2027",
		Readers: []string{"alice@example.com"},
		Body: "Engineering bands for 2027: E3 from 95,000 to 120,000 EUR; E4 from 120,000 to 150,000 EUR.\n\n" +
			"The bands are confidential to people managers until the review cycle opens in February.",
	},
}

func seedDocuments(ctx context.Context, client *ent.Client) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, d := range Documents {
		if _, err := resource.AddDocument(ctx, tx, d); err != nil {
			return fmt.Errorf("seed document %q: %w", d.Title, err)
		}
	}
	return tx.Commit()
}

// SeedAgent makes the default agent and its first version, if missing.
// Only a demo server seeds it; a production server serves the agents it
// was given.
func SeedAgent(ctx context.Context, client *ent.Client) error {
	exists, err := client.Agent.Query().Where(entagent.Slug(room.DefaultAgent)).Exist(ctx)
	if err != nil || exists {
		return err
	}
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	a, err := tx.Agent.Create().SetSlug(room.DefaultAgent).SetName("Assistant").Save(ctx)
	if ent.IsConstraintError(err) {
		return nil // another replica seeded it first
	}
	if err != nil {
		return fmt.Errorf("seed agent: %w", err)
	}
	if _, err := tx.AgentVersion.Create().
		SetAgentID(a.ID).
		SetVersion(1).
		SetController("react").
		SetTools([]string{tools.RetrievalName, tools.ReadDocumentName, tools.HistorySearchName,
			tools.RunCodeName, tools.CreateArtifactName, tools.CreateTaskName, tools.ListTasksName, tools.UpdateTaskName,
			tools.SendWebhookName, tools.DelegateName}).
		SetSpecialists([]string{Researcher}).
		SetModelRoute("builtin").
		SetEffort("medium").
		SetSystemPrompt("You are turngate's assistant. Answer from the conversation and from what your tools find, and cite what you use by its [id].").
		SetBudgets(map[string]int64{"max_steps": 4, "max_tool_calls": 8, "max_tokens": 65536, "wall_time_ms": 120000, "context_tokens": 8000}).
		Save(ctx); err != nil {
		return fmt.Errorf("seed agent version: %w", err)
	}
	r, err := tx.Agent.Create().SetSlug(Researcher).SetName("Researcher").Save(ctx)
	if err != nil {
		return fmt.Errorf("seed specialist: %w", err)
	}
	if _, err := tx.AgentVersion.Create().
		SetAgentID(r.ID).SetVersion(1).SetController("react").SetModelRoute("builtin").SetEffort("high").
		SetTools([]string{tools.RetrievalName, tools.ReadDocumentName}).
		SetSystemPrompt("You are a research specialist: search the member's documents, quote what answers the task and cite it by its [id].").
		SetBudgets(map[string]int64{"max_steps": 4, "max_tool_calls": 6}).
		Save(ctx); err != nil {
		return fmt.Errorf("seed specialist version: %w", err)
	}
	return tx.Commit()
}

// Researcher is the demo's specialist: the default agent's roster holds
// it, and alice's configured roster does too (bob's is empty).
const Researcher = "researcher"

// TeamRoomTitle is the title of the demo's shared room.
const TeamRoomTitle = "Team room"

// TeamRoom returns the demo's shared room.
func TeamRoom(ctx context.Context, client *ent.Client) (*ent.Conversation, error) {
	return client.Conversation.Query().
		Where(entconv.KindEQ(entconv.KindShared), entconv.Title(TeamRoomTitle),
			entconv.HasOwnerWith(entmember.PlatformUserID(authority.DevSubject(People[0].Email)))).
		First(ctx)
}

// Tour is the explorer's opening document in dev mode: the three
// operations of the README's tour, aimed at room.
func Tour(room string) string {
	return `# turngate — you are alice (see the Headers tab below).
# 1. Run "Watch" (the play button offers each operation): the room's journal
#    streams here, live.
# 2. Open a new tab (+), paste "Send" there and run it: watch the answer
#    stream into the first tab, token by token.
# 3. Run "Send" again unchanged: the same idempotencyKey returns the same
#    turn, and nothing runs twice.

subscription Watch {
  journal(conversationId: "` + room + `", after: 0) { seq kind text turnId }
}

mutation Send {
  submitMessage(input: {conversationId: "` + room + `", text: "Hello from GraphiQL!", idempotencyKey: "tour-1"}) {
    id position state
  }
}

query Rooms {
  me { email displayName }
  conversations { edges { node { id title kind publicKey channel head } } }
}
`
}

// UseRoute makes route the default agent's model route: when its latest
// version routes elsewhere, it publishes the next version, identical but
// for the route. Versions are immutable, so turns already accepted keep
// the route they were accepted with.
func UseRoute(ctx context.Context, client *ent.Client, route string) error {
	latest, err := client.AgentVersion.Query().
		Where(entagentversion.HasAgentWith(entagent.Slug(room.DefaultAgent))).
		Order(ent.Desc(entagentversion.FieldVersion)).First(ctx)
	if ent.IsNotFound(err) {
		return fmt.Errorf("TURNGATE_AGENT_ROUTE sets the route of the default agent %q, which does not exist (it is seeded in demo mode)", room.DefaultAgent)
	}
	if err != nil {
		return fmt.Errorf("default agent: %w", err)
	}
	if latest.ModelRoute == route {
		return nil
	}
	_, err = client.AgentVersion.Create().
		SetAgentID(latest.AgentID).SetVersion(latest.Version + 1).
		SetController(latest.Controller).SetModelRoute(route).SetEffort(latest.Effort).
		SetSystemPrompt(latest.SystemPrompt).SetTools(latest.Tools).SetSpecialists(latest.Specialists).
		SetBudgets(latest.Budgets).
		Save(ctx)
	if ent.IsConstraintError(err) {
		return nil // another replica published it first
	}
	return err
}
