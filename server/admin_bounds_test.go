package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

const (
	grantOp  = `mutation($e: String!, $p: String!) { grantPermission(input: {email: $e, permission: $p}) { permissions } }`
	revokeOp = `mutation($e: String!, $p: String!) { revokePermission(input: {email: $e, permission: $p}) { permissions } }`
	joinOp   = `mutation($e: String!, $g: String!) { addGroupMember(input: {email: $e, group: $g}) { groups } }`
	leaveOp  = `mutation($e: String!, $g: String!) { removeGroupMember(input: {email: $e, group: $g}) { groups } }`
	readOp   = `mutation($d: ID!, $r: [String!]!) { setDocumentReaders(input: {documentId: $d, readers: $r}) { readers } }`
)

// adminDocumentIDs maps every document's title to its id, as an operator
// with admin:documents lists them.
func adminDocumentIDs(t *testing.T, ctx context.Context, c *gqlclient.Client) map[string]string {
	t.Helper()
	var out struct {
		AdminDocuments struct{ Nodes []struct{ ID, Title string } }
	}
	if err := c.Do(ctx, `{ adminDocuments(first: 500) { nodes { id title } } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, d := range out.AdminDocuments.Nodes {
		ids[d.Title] = d.ID
	}
	return ids
}

// adminEventCount counts the admin record's rows.
func adminEventCount(t *testing.T, h *servertest.Harness) int {
	t.Helper()
	var n int
	if err := h.DB.QueryRow(`SELECT count(*) FROM admin_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// signIn makes email a member (a member exists once they have signed in).
func signIn(t *testing.T, h *servertest.Harness, email string) *gqlclient.Client {
	t.Helper()
	c := h.Client(t, email)
	servertest.Rooms(t, c)
	return c
}

// TestAdminMembersAloneCannotEscalate: the escalation of a holder of
// admin:members alone, step by step. He may not grant what he does not
// hold (admin:documents, admin:agents, tasks.write), nor reach the bands
// through their reader list or a group that reads them, nor take
// admin:members from alice, who holds more than he does; each step is
// FORBIDDEN naming what he lacks, and changes nothing, the admin record
// included. What he holds, he may grant.
func TestAdminMembersAloneCannotEscalate(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), signIn(t, h, bob)
	signIn(t, h, mallory)
	bands := adminDocumentIDs(t, ctx, a)["Compensation bands 2027"]
	// The bands' managers read them as a group; bob is not one.
	mustDo(t, ctx, a, readOp, map[string]any{"d": bands, "r": []string{alice, "group:managers"}})
	mustDo(t, ctx, a, grantOp, map[string]any{"e": bob, "p": "admin:members"})

	before, events := servertest.AdminState(t, h), adminEventCount(t, h)
	steps := []struct {
		name, query string
		vars        map[string]any
		names       string // what the refusal names
	}{
		{"grant himself admin:documents", grantOp, map[string]any{"e": bob, "p": "admin:documents"}, "admin:documents"},
		{"grant himself admin:agents", grantOp, map[string]any{"e": bob, "p": "admin:agents"}, "admin:agents"},
		{"grant mallory tasks.write", grantOp, map[string]any{"e": mallory, "p": "tasks.write"}, "a permission you hold yourself"},
		{"put himself on the bands' readers", readOp, map[string]any{"d": bands, "r": []string{alice, bob}}, "admin:documents"},
		{"join the group that reads the bands", joinOp, map[string]any{"e": bob, "g": "managers"}, "name that group"},
		{"put mallory in the group that reads the bands", joinOp, map[string]any{"e": mallory, "g": "managers"}, "name that group"},
		{"revoke alice's admin:members", revokeOp, map[string]any{"e": alice, "p": "admin:members"}, "that member holds"},
		{"revoke alice's documents.read", revokeOp, map[string]any{"e": alice, "p": "documents.read"}, "that member holds"},
		{"take alice out of a group", leaveOp, map[string]any{"e": alice, "g": "eng"}, "that member holds"},
	}
	for _, tt := range steps {
		err := b.Do(ctx, tt.query, tt.vars, nil)
		if code := gqlclient.CodeOf(err); code != "FORBIDDEN" || !strings.Contains(err.Error(), tt.names) {
			t.Fatalf("%s: %v (%s), want FORBIDDEN saying %q", tt.name, err, code, tt.names)
		}
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatalf("refused escalation changed something:\n%s\n%s", before, after)
	}
	if n := adminEventCount(t, h); n != events {
		t.Fatalf("refused changes left %d admin events, want %d", n, events)
	}
	if _, reads := citationDocuments(t, ctx, b)["Compensation bands 2027"]; reads {
		t.Fatal("bob reads the bands")
	}

	// What he holds he may give, and it is recorded.
	mustDo(t, ctx, b, grantOp, map[string]any{"e": mallory, "p": "documents.read"})
	mustDo(t, ctx, b, grantOp, map[string]any{"e": mallory, "p": "admin:members"})
	var who string
	if err := h.DB.QueryRow(`SELECT string_agg(p.permission, ',' ORDER BY p.permission) FROM member_permissions p JOIN members m ON m.id = p.member_id WHERE m.email = $1`, mallory).Scan(&who); err != nil {
		t.Fatal(err)
	}
	if who != "admin:members,documents.read" {
		t.Fatalf("mallory holds %s", who)
	}
	if n := adminEventCount(t, h); n != events+2 {
		t.Fatalf("%d admin events after two grants, want %d", n, events+2)
	}
}

// TestAdminDocumentChangesNeedReadAccess: a holder of admin:documents
// changes, re-reads and deletes only documents they may read now (the
// ACL and documents.read); adding is unrestricted. A group change is
// bounded by the documents whose readers name the group.
func TestAdminDocumentChangesNeedReadAccess(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), signIn(t, h, bob)
	signIn(t, h, mallory)
	docs := adminDocumentIDs(t, ctx, a)
	bands, launch := docs["Compensation bands 2027"], docs["Launch plan"]
	mustDo(t, ctx, a, grantOp, map[string]any{"e": bob, "p": "admin:documents"})

	before := servertest.AdminState(t, h)
	for _, q := range []string{
		`mutation($d: ID!) { replaceDocument(input: {documentId: $d, body: "Everyone is E4."}) { id } }`,
		`mutation($d: ID!) { setDocumentReaders(input: {documentId: $d, readers: ["bob@example.com"]}) { id } }`,
		`mutation($d: ID!) { deleteDocument(input: {documentId: $d}) }`,
	} {
		err := b.Do(ctx, q, map[string]any{"d": bands}, nil)
		if code := gqlclient.CodeOf(err); code != "FORBIDDEN" || !strings.Contains(err.Error(), "read") {
			t.Fatalf("bob: %s on the bands: %v (%s), want FORBIDDEN", q, err, code)
		}
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatalf("refused document changes changed something:\n%s\n%s", before, after)
	}

	// He may change what he reads, and add what he likes — but a document
	// he added for alice alone is then out of his reach.
	mustDo(t, ctx, b, `mutation($d: ID!) { replaceDocument(input: {documentId: $d, body: "The launch is on Friday."}) { id } }`, map[string]any{"d": launch})
	var added struct{ AddDocument struct{ ID string } }
	if err := b.Do(ctx, `mutation { addDocument(input: {title: "For alice", body: "A note.", readers: ["alice@example.com"]}) { id } }`, nil, &added); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(ctx, readOp, map[string]any{"d": added.AddDocument.ID, "r": []string{bob}}, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("bob re-reads a document he may not read: %v", err)
	}
	// Without documents.read he reads no document, and changes none.
	mustDo(t, ctx, a, revokeOp, map[string]any{"e": bob, "p": "documents.read"})
	if err := b.Do(ctx, `mutation($d: ID!) { deleteDocument(input: {documentId: $d}) }`, map[string]any{"d": launch}, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("bob without documents.read deletes the launch plan: %v", err)
	}
	mustDo(t, ctx, a, grantOp, map[string]any{"e": bob, "p": "documents.read"})

	// Groups: bob, now also holding admin:members, may fill a group whose
	// documents he reads, and a group no document names; not one that
	// reads the bands.
	mustDo(t, ctx, a, grantOp, map[string]any{"e": bob, "p": "admin:members"})
	mustDo(t, ctx, a, readOp, map[string]any{"d": launch, "r": []string{alice, bob, "group:launch"}})
	mustDo(t, ctx, a, readOp, map[string]any{"d": bands, "r": []string{alice, "group:managers"}})
	mustDo(t, ctx, b, joinOp, map[string]any{"e": mallory, "g": "launch"})
	mustDo(t, ctx, b, joinOp, map[string]any{"e": mallory, "g": "nothing-yet"})
	mustDo(t, ctx, b, leaveOp, map[string]any{"e": mallory, "g": "launch"})
	mustDo(t, ctx, a, joinOp, map[string]any{"e": mallory, "g": "managers"})
	for _, op := range []string{joinOp, leaveOp} {
		if err := b.Do(ctx, op, map[string]any{"e": mallory, "g": "managers"}, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
			t.Fatalf("bob changes the managers, who read the bands: %v", err)
		}
	}
	var groups string
	if err := h.DB.QueryRow(`SELECT string_agg(g.name, ',' ORDER BY g.name) FROM member_groups g JOIN members m ON m.id = g.member_id WHERE m.email = $1`, mallory).Scan(&groups); err != nil {
		t.Fatal(err)
	}
	if groups != "managers,nothing-yet" {
		t.Fatalf("mallory is in %s, want managers,nothing-yet", groups)
	}
}

// membersAdmins lists who holds admin:members, by email.
func membersAdmins(t *testing.T, h *servertest.Harness) string {
	t.Helper()
	var who string
	if err := h.DB.QueryRow(`SELECT coalesce(string_agg(m.email, ',' ORDER BY m.email), '') FROM member_permissions p
JOIN members m ON m.id = p.member_id WHERE p.permission = 'admin:members'`).Scan(&who); err != nil {
		t.Fatal(err)
	}
	return who
}

// raceRevokes runs the two revocations as concurrent transactions: it
// holds the admin:members rows itself until both wait for them, then lets
// both go. It returns each revocation's error.
func raceRevokes(t *testing.T, ctx context.Context, h *servertest.Harness, revokes [2]struct {
	c     *gqlclient.Client
	email string
}) [2]error {
	t.Helper()
	hold, err := h.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, `SELECT 1 FROM member_permissions WHERE permission = 'admin:members' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var errs [2]error
	var wg sync.WaitGroup
	for i, r := range revokes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.c.Do(ctx, revokeOp, map[string]any{"e": r.email, "p": "admin:members"}, nil)
		}()
	}
	servertest.WaitFor(t, ctx, h.DB, `SELECT count(*) >= 2 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return errs
}

// TestLastMembersAdminStays: the last holder of admin:members cannot be
// removed (CONFLICT, nothing changed); two holders revoking each other,
// or each themselves, in concurrent transactions leave exactly one.
func TestLastMembersAdminStays(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), signIn(t, h, bob)

	before := servertest.AdminState(t, h)
	if err := a.Do(ctx, revokeOp, map[string]any{"e": alice, "p": "admin:members"}, nil); gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatalf("the last holder revokes her own admin:members: %v, want CONFLICT", err)
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatal("the refused revocation changed something")
	}

	// Both hold what the other holds, so either may act on the other.
	equal := func(from *gqlclient.Client, to string) {
		for _, p := range []string{"admin:members", "admin:documents", "admin:agents"} {
			mustDo(t, ctx, from, grantOp, map[string]any{"e": to, "p": p})
		}
	}
	clients, other := map[string]*gqlclient.Client{alice: a, bob: b}, map[string]string{alice: bob, bob: alice}
	type revoke = struct {
		c     *gqlclient.Client
		email string
	}
	equal(a, bob)
	for _, tt := range []struct {
		name    string
		revokes [2]revoke
	}{
		{"each other", [2]revoke{{a, bob}, {b, alice}}},
		{"each themselves", [2]revoke{{a, alice}, {b, bob}}},
	} {
		if who := membersAdmins(t, h); who != alice+","+bob {
			t.Fatalf("%s: admin:members held by %s before the race", tt.name, who)
		}
		errs := raceRevokes(t, ctx, h, tt.revokes)
		won := 0
		for i, err := range errs {
			switch code := gqlclient.CodeOf(err); {
			case err == nil:
				won++
			case code != "FORBIDDEN" && code != "CONFLICT":
				t.Fatalf("%s: revocation %d: %v (%s), want it done, FORBIDDEN or CONFLICT", tt.name, i, err, code)
			}
		}
		who := membersAdmins(t, h)
		if won != 1 || clients[who] == nil {
			t.Fatalf("%s: %d revocations done (%v), admin:members held by %q; want one done and one holder", tt.name, won, errs, who)
		}
		// The holder left gives the other their admin:members back.
		equal(clients[who], other[who])
	}
}

// adminEventView is an adminEvents node.
type adminEventView struct {
	Actor   struct{ Email string }
	Area    string
	Action  string
	Subject string
	Detail  json.RawMessage
	At      time.Time
}

const adminEventsQuery = `query($first: Int, $after: String) { adminEvents(first: $first, after: $after) {
  nodes { actor { email } area action subject detail at }
  pageInfo { hasNextPage hasPreviousPage endCursor }
} }`

type adminEventPage struct {
	AdminEvents struct {
		Nodes    []adminEventView
		PageInfo struct {
			HasNextPage, HasPreviousPage bool
			EndCursor                    *string
		}
	}
}

// adminEvents reads the whole admin record as c, newest first, in pages
// of first.
func adminEvents(t *testing.T, ctx context.Context, c *gqlclient.Client, first int) []adminEventView {
	t.Helper()
	var all []adminEventView
	var after *string
	for {
		var page adminEventPage
		if err := c.Do(ctx, adminEventsQuery, map[string]any{"first": first, "after": after}, &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.AdminEvents.Nodes...)
		if !page.AdminEvents.PageInfo.HasNextPage {
			return all
		}
		after = page.AdminEvents.PageInfo.EndCursor
	}
}

// TestAdminEventsRecordEachChange: each of the eleven admin mutations
// writes one admin event with its change, in its transaction (who, area,
// action, subject, detail, never a document's body); a change that
// converged on what was already there, or was refused, writes none. The
// record reads newest first, in pages, restricted to the areas whose
// permission the reader holds now; with none, FORBIDDEN.
func TestAdminEventsRecordEachChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), signIn(t, h, bob)
	m := signIn(t, h, mallory)
	const secret = "The quokka migration starts in March."
	var added struct{ AddDocument struct{ ID string } }
	if err := a.Do(ctx, `mutation($b: String!) { addDocument(input: {title: "Quokka plan", body: $b, readers: ["alice@example.com"]}) { id } }`,
		map[string]any{"b": secret}, &added); err != nil {
		t.Fatal(err)
	}
	quokka := added.AddDocument.ID
	version := `{controller: "react", modelRoute: "builtin", tools: ["retrieval"]}`
	changes := []struct {
		query                   string
		vars                    map[string]any
		area, action, subject   string
		detail                  string // a fragment of the detail
		convergedAgainUnchanged bool
	}{
		{`mutation($d: ID!) { replaceDocument(input: {documentId: $d, body: "The quokkas moved to April."}) { id } }`, map[string]any{"d": quokka},
			"DOCUMENTS", "replace_document", quokka, `"title":"Quokka plan"`, true},
		{readOp, map[string]any{"d": quokka, "r": []string{alice, "group:eng"}}, "DOCUMENTS", "set_document_readers", quokka, `"group:eng"`, true},
		{`mutation($d: ID!) { deleteDocument(input: {documentId: $d}) }`, map[string]any{"d": quokka}, "DOCUMENTS", "delete_document", quokka, `"title":"Quokka plan"`, false},
		{grantOp, map[string]any{"e": bob, "p": "tasks.write"}, "MEMBERS", "grant_permission", bob, `"permission":"tasks.write"`, true},
		{revokeOp, map[string]any{"e": bob, "p": "tasks.write"}, "MEMBERS", "revoke_permission", bob, `"permission":"tasks.write"`, true},
		{joinOp, map[string]any{"e": bob, "g": "eng"}, "MEMBERS", "add_group_member", bob, `"group":"eng"`, true},
		{leaveOp, map[string]any{"e": bob, "g": "eng"}, "MEMBERS", "remove_group_member", bob, `"group":"eng"`, true},
		{`mutation { createAgent(input: {slug: "helper", name: "Helper", version: ` + version + `}) { id } }`, nil, "AGENTS", "create_agent", "helper", `"version":1`, false},
		{`mutation { addAgentVersion(input: {slug: "helper", version: ` + version + `}) { id } }`, nil, "AGENTS", "add_agent_version", "helper", `"version":2`, false},
		{`mutation { setMemberRoster(input: {email: "bob@example.com", agent: "assistant", specialists: ["researcher"]}) { id } }`, nil,
			"AGENTS", "set_member_roster", bob, `"agent":"assistant"`, true},
	}
	check := func(what string, got adminEventView, area, action, subject, detail string) {
		t.Helper()
		var compact bytes.Buffer
		if err := json.Compact(&compact, got.Detail); err != nil {
			t.Fatalf("%s: detail %s: %v", what, got.Detail, err)
		}
		if got.Actor.Email != alice || got.Area != area || got.Action != action || got.Subject != subject ||
			!strings.Contains(compact.String(), detail) || strings.Contains(compact.String(), "quokka") || got.At.IsZero() {
			t.Fatalf("%s: newest event %+v (detail %s), want alice %s %s %s with %s and no body", what, got, compact.String(), area, action, subject, detail)
		}
	}
	events := adminEvents(t, ctx, a, 500)
	if len(events) != 1 {
		t.Fatalf("%d events after one addDocument: %+v", len(events), events)
	}
	check("addDocument", events[0], "DOCUMENTS", "add_document", quokka, `"readers":["alice@example.com"]`)
	for _, tt := range changes {
		mustDo(t, ctx, a, tt.query, tt.vars)
		events = adminEvents(t, ctx, a, 500)
		check(tt.action, events[0], tt.area, tt.action, tt.subject, tt.detail)
		if tt.convergedAgainUnchanged {
			n := adminEventCount(t, h)
			mustDo(t, ctx, a, tt.query, tt.vars)
			if again := adminEventCount(t, h); again != n {
				t.Fatalf("%s again, changing nothing, wrote %d events", tt.action, again-n)
			}
		}
	}
	if len(events) != 11 {
		t.Fatalf("%d events after eleven changes", len(events))
	}
	// A refused change writes nothing.
	if err := b.Do(ctx, grantOp, map[string]any{"e": bob, "p": "admin:agents"}, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatal(err)
	}
	if n := adminEventCount(t, h); n != 11 {
		t.Fatalf("a refused grant left an event (%d)", n)
	}

	// Pages of four: the same record, newest first, in three pages.
	paged := adminEvents(t, ctx, a, 4)
	if fmt.Sprint(paged) != fmt.Sprint(events) {
		t.Fatalf("paged record differs:\n%+v\n%+v", paged, events)
	}
	for i := 1; i < len(events); i++ {
		if events[i].At.After(events[i-1].At) {
			t.Fatalf("event %d is newer than event %d", i, i-1)
		}
	}

	// bob, given admin:agents only, reads the agents' changes only.
	mustDo(t, ctx, a, grantOp, map[string]any{"e": bob, "p": "admin:agents"})
	var agents []adminEventView
	for _, e := range adminEvents(t, ctx, a, 500) {
		if e.Area == "AGENTS" {
			agents = append(agents, e)
		}
	}
	if got := adminEvents(t, ctx, b, 500); len(agents) != 3 || fmt.Sprint(got) != fmt.Sprint(agents) {
		t.Fatalf("bob with admin:agents reads %+v, want the %d agents' events", got, len(agents))
	}
	// Without any admin permission: FORBIDDEN.
	if err := m.Do(ctx, adminEventsQuery, map[string]any{"first": 10}, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("mallory reads the admin record: %v", err)
	}
	if err := a.Do(ctx, adminEventsQuery, map[string]any{"first": 0}, nil); gqlclient.CodeOf(err) != "BAD_USER_INPUT" {
		t.Fatalf("first: 0: %v", err)
	}
}
