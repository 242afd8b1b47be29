package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// mustDo runs a GraphQL operation that must succeed.
func mustDo(t *testing.T, ctx context.Context, c *gqlclient.Client, query string, vars map[string]any) {
	t.Helper()
	if err := c.Do(ctx, query, vars, nil); err != nil {
		t.Fatalf("%s %v: %v", query, vars, err)
	}
}

// TestAgentVersionWithoutSpecialists: an agent version written without
// specialists (or tools, or budgets) stores empty lists, and a member
// with a roster on that agent still submits; stored lists that are not
// arrays at all (a database whose checks were lifted) make the effective
// roster empty, never a submission INTERNAL.
func TestAgentVersionWithoutSpecialists(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	notes := servertest.Rooms(t, a)["Alice's notes"].ID
	mustDo(t, ctx, a, `mutation { createAgent(input: {slug: "plain", name: "Plain", version: {controller: "single", modelRoute: "builtin"}}) { id } }`, nil)
	mustDo(t, ctx, a, `mutation { addAgentVersion(input: {slug: "assistant", version: {controller: "react", modelRoute: "builtin", tools: ["retrieval"]}}) { id } }`, nil)
	var lists string
	if err := h.DB.QueryRow(`SELECT string_agg(v.tools::text || v.specialists::text || v.budgets::text, ' ' ORDER BY a.slug)
FROM agent_versions v JOIN agents a ON a.id = v.agent_id
WHERE (a.slug, v.version) IN (('plain', 1), ('assistant', 2))`).Scan(&lists); err != nil {
		t.Fatal(err)
	}
	if lists != `["retrieval"][]{} [][]{}` {
		t.Fatalf("stored lists %s", lists)
	}
	// alice's roster on the assistant names the researcher; the newest
	// version names no specialist, so her effective roster is empty.
	done := servertest.AwaitTurnEnd(t, ctx, a, servertest.SubmitAs(t, ctx, a, notes, "What is the launch date?", "no-specialists"))
	if done.State != "COMPLETED" {
		t.Fatalf("turn %s", done.State)
	}
	if _, err := citationSubmitAs(ctx, a, notes, "Research it", "route", "researcher", nil, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("routing to a specialist the version does not name: %v, want FORBIDDEN", err)
	}

	// Lift the checks, as a database restored from before them would be,
	// and store what is not a list.
	if _, err := h.DB.Exec(`ALTER TABLE agent_versions DROP CONSTRAINT agent_versions_lists;
ALTER TABLE agent_versions ALTER COLUMN specialists DROP NOT NULL;
ALTER TABLE member_agent_configs DROP CONSTRAINT member_agent_configs_list;
ALTER TABLE member_agent_configs ALTER COLUMN specialists DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	for i, tt := range []struct{ version, roster any }{
		{nil, `["researcher"]`}, // SQL NULL
		{`null`, `["researcher"]`},
		{`{"researcher": true}`, `["researcher"]`},
		{`"researcher"`, `["researcher"]`},
		{`[1, {"x": "researcher"}, "researcher"]`, `null`},
		{`["researcher"]`, `"researcher"`},
		{`["researcher"]`, `{"researcher": 1}`},
		{`["researcher"]`, `7`},
	} {
		if _, err := h.DB.Exec(`INSERT INTO agent_versions (id, agent_id, version, controller, model_route, effort, system_prompt, tools, specialists, budgets)
SELECT gen_random_uuid(), v.agent_id, v.version + 1, v.controller, v.model_route, v.effort, v.system_prompt, v.tools, $1::jsonb, v.budgets
FROM agent_versions v JOIN agents a ON a.id = v.agent_id WHERE a.slug = 'assistant' ORDER BY v.version DESC LIMIT 1`, tt.version); err != nil {
			t.Fatal(err)
		}
		if _, err := h.DB.Exec(`UPDATE member_agent_configs c SET specialists = $1::jsonb FROM members m, agents a
WHERE m.id = c.member_id AND a.id = c.agent_id AND m.email = $2 AND a.slug = 'assistant'`, tt.roster, alice); err != nil {
			t.Fatal(err)
		}
		if _, err := citationSubmitAs(ctx, a, notes, "Hello", fmt.Sprint("stored-", i), nil, nil, nil); err != nil {
			t.Fatalf("version specialists %v, roster %v: submit: %v", tt.version, tt.roster, err)
		}
		// Only a list of the version naming the researcher, with a roster
		// that is a list naming it, routes to it.
		_, err := citationSubmitAs(ctx, a, notes, "Research it", fmt.Sprint("stored-route-", i), "researcher", nil, nil)
		if code := gqlclient.CodeOf(err); code != "FORBIDDEN" {
			t.Fatalf("version specialists %v, roster %v: routing: %v (%s), want FORBIDDEN", tt.version, tt.roster, err, code)
		}
	}
}
