package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turngate/turngate/server"

	"github.com/Khan/genqlient/graphql"

	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/resource"
)

// multiFlag is a flag that may be given many times.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

const adminUsage = `usage: turngate admin [--url URL] [--as EMAIL] <command>

  docs add [--reader R ...] [--title T] FILE|FOLDER ...   add documents (title: --title, the first # heading, or the file name); all checked first, unchanged ones skipped
  docs list                                            every document with its readers
  docs replace [--title T] ID FILE                     new content for a document
  docs readers ID --reader R ...                       replace a document's readers (emails, group:<name>)
  docs rm ID                                           delete a document
  members list                                         members with permissions and groups
  members grant|revoke EMAIL PERMISSION                e.g. admin:documents, documents.read
  members join|leave EMAIL GROUP                       group membership
  agents list                                          agents and their versions
  agents create|version SLUG --controller C --route R [--name N] [--tool T ...] [--specialist S ...] [--prompt-file F] [--budget k=v ...]
  agents roster EMAIL AGENT [SPECIALIST ...]           the specialists a member allows an agent
  events list [--limit N]                              the admin record, newest first (default 100; 0: all)
`

// adminCmd is `turngate admin`: the admin surface over the GraphQL API,
// as the member --as (dev) or TURNGATE_IDENTITY names.
func adminCmd(ctx context.Context, cfg server.Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	var cf clientFlags
	cf.register(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		return flag.ErrHelp
	}
	c, err := cf.client(cfg)
	if err != nil {
		return err
	}
	a := &adminCLI{ctx: ctx, c: c, g: c.GraphQL(), out: stdout}
	switch rest[0] + " " + rest[1] {
	case "docs add":
		return a.docsAdd(rest[2:])
	case "docs list":
		return a.docsList()
	case "docs replace":
		return a.docsReplace(rest[2:])
	case "docs readers":
		return a.docsReaders(rest[2:])
	case "docs rm":
		return a.need(rest, 3, func() error {
			return a.mutate(func(g graphql.Client) error {
				_, err := client.DeleteDocument(ctx, g, &client.DeleteDocumentInput{DocumentId: rest[2]})
				return err
			})
		})
	case "members list":
		return a.membersList()
	case "members grant", "members revoke", "members join", "members leave":
		return a.need(rest, 4, func() error { return a.memberChange(rest[1], rest[2], rest[3]) })
	case "agents list":
		return a.agentsList()
	case "agents create", "agents version":
		return a.agentVersion(rest[1], rest[2:])
	case "events list":
		return a.eventsList(rest[2:])
	case "agents roster":
		return a.need(rest, 4, func() error {
			var out *client.SetMemberRosterResponse
			err := a.mutate(func(g graphql.Client) (err error) {
				out, err = client.SetMemberRoster(ctx, g, &client.MemberRosterInput{Email: rest[2], Agent: rest[3], Specialists: append([]string{}, rest[4:]...)})
				return
			})
			if err == nil {
				a.printMember(&out.SetMemberRoster.AdminMemberFields)
			}
			return err
		})
	}
	fs.Usage()
	return flag.ErrHelp
}

type adminCLI struct {
	ctx context.Context
	c   *client.Client
	g   graphql.Client
	out io.Writer
}

// mutate sends one admin mutation, waiting out the member's command
// budget: every mutation spends from it, and a RATE_LIMITED answer means
// the server ran nothing (the budget is checked before the mutation
// runs), so sending the same mutation again after retryAfterMs cannot do
// it twice. A folder of documents loads at the budget's pace instead of
// stopping where the budget ends.
func (a *adminCLI) mutate(op func(graphql.Client) error) error {
	for {
		err := a.c.Mutate(a.ctx, op)
		var e *client.Error
		if !errors.As(err, &e) || e.Code != client.RateLimited {
			return err
		}
		wait := e.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (a *adminCLI) need(args []string, n int, f func() error) error {
	if len(args) < n {
		return fmt.Errorf("%s %s: missing arguments (see turngate admin -h)", args[0], args[1])
	}
	return f()
}

func (a *adminCLI) docsAdd(args []string) error {
	fs := flag.NewFlagSet("docs add", flag.ContinueOnError)
	var readers multiFlag
	fs.Var(&readers, "reader", "who may read the documents: an email or group:<name> (repeat)")
	title := fs.String("title", "", "the title (one file only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := readDocFiles(fs.Args(), *title)
	if err != nil {
		return err
	}
	// A re-run adds nothing twice: a file whose title and content digest
	// a document already has is that document.
	have, err := a.documentsByContent()
	if err != nil {
		return err
	}
	for _, f := range files {
		key := docContent{title: f.title, digest: resource.Digest(f.body)}
		if id, ok := have[key]; ok {
			fmt.Fprintf(a.out, "%s\t%s\tunchanged\n", id, f.title)
			continue
		}
		var out *client.AddDocumentResponse
		err = a.mutate(func(g graphql.Client) (err error) {
			out, err = client.AddDocument(a.ctx, g, &client.AddDocumentInput{Title: f.title, Body: f.body, Readers: append([]string{}, readers...)})
			return
		})
		if err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		have[key] = out.AddDocument.Id
		fmt.Fprintf(a.out, "%s\t%s\n", out.AddDocument.Id, out.AddDocument.Title)
	}
	return nil
}

// docContent is what makes two documents the same for docs add.
type docContent struct{ title, digest string }

// documentsByContent is every document's id by its title and digest.
func (a *adminCLI) documentsByContent() (map[docContent]string, error) {
	have := map[docContent]string{}
	var after *string
	for {
		var out *client.AdminDocumentsResponse
		first := 500
		err := a.c.Query(a.ctx, func(g graphql.Client) (err error) { out, err = client.AdminDocuments(a.ctx, g, &first, after); return })
		if err != nil {
			return nil, err
		}
		for _, d := range out.AdminDocuments.Nodes {
			have[docContent{title: d.Title, digest: d.Digest}] = d.Id
		}
		if !out.AdminDocuments.PageInfo.HasNextPage {
			return have, nil
		}
		after = out.AdminDocuments.PageInfo.EndCursor
	}
}

func (a *adminCLI) docsList() error {
	w := tabwriter.NewWriter(a.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTITLE\tPASSAGES\tREADERS")
	var after *string
	for {
		var out *client.AdminDocumentsResponse
		first := 500
		err := a.c.Query(a.ctx, func(g graphql.Client) (err error) { out, err = client.AdminDocuments(a.ctx, g, &first, after); return })
		if err != nil {
			return err
		}
		for _, d := range out.AdminDocuments.Nodes {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", d.Id, d.Title, d.Passages, strings.Join(d.Readers, ","))
		}
		if !out.AdminDocuments.PageInfo.HasNextPage {
			return w.Flush()
		}
		after = out.AdminDocuments.PageInfo.EndCursor
	}
}

func (a *adminCLI) docsReplace(args []string) error {
	fs := flag.NewFlagSet("docs replace", flag.ContinueOnError)
	title := fs.String("title", "", "a new title (default: keep it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("docs replace: ID FILE")
	}
	body, err := os.ReadFile(fs.Arg(1))
	if err != nil {
		return err
	}
	in := &client.ReplaceDocumentInput{DocumentId: fs.Arg(0), Body: string(body)}
	if *title != "" {
		in.Title = title
	}
	var out *client.ReplaceDocumentResponse
	err = a.mutate(func(g graphql.Client) (err error) { out, err = client.ReplaceDocument(a.ctx, g, in); return })
	if err == nil {
		fmt.Fprintf(a.out, "%s\t%s\t%s\n", out.ReplaceDocument.Id, out.ReplaceDocument.Title, out.ReplaceDocument.Digest)
	}
	return err
}

func (a *adminCLI) docsReaders(args []string) error {
	fs := flag.NewFlagSet("docs readers", flag.ContinueOnError)
	var readers multiFlag
	fs.Var(&readers, "reader", "who may read it (repeat; none: nobody)")
	if len(args) == 0 {
		return errors.New("docs readers: ID --reader ...")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var out *client.SetDocumentReadersResponse
	err := a.mutate(func(g graphql.Client) (err error) {
		out, err = client.SetDocumentReaders(a.ctx, g, &client.SetDocumentReadersInput{DocumentId: args[0], Readers: append([]string{}, readers...)})
		return
	})
	if err == nil {
		fmt.Fprintf(a.out, "%s\t%s\n", out.SetDocumentReaders.Id, strings.Join(out.SetDocumentReaders.Readers, ","))
	}
	return err
}

func (a *adminCLI) printMember(m *client.AdminMemberFields) {
	fmt.Fprintf(a.out, "%s\t%s\tpermissions=%s\tgroups=%s\n", m.Email, m.DisplayName, strings.Join(m.Permissions, ","), strings.Join(m.Groups, ","))
}

func (a *adminCLI) membersList() error {
	var after *string
	for {
		var out *client.AdminMembersResponse
		first := 500
		err := a.c.Query(a.ctx, func(g graphql.Client) (err error) { out, err = client.AdminMembers(a.ctx, g, &first, after); return })
		if err != nil {
			return err
		}
		for _, m := range out.AdminMembers.Nodes {
			a.printMember(&m.AdminMemberFields)
		}
		if !out.AdminMembers.PageInfo.HasNextPage {
			return nil
		}
		after = out.AdminMembers.PageInfo.EndCursor
	}
}

func (a *adminCLI) memberChange(verb, email, what string) error {
	var m *client.AdminMemberFields
	err := a.mutate(func(g graphql.Client) error {
		switch verb {
		case "grant":
			out, err := client.GrantPermission(a.ctx, g, &client.PermissionInput{Email: email, Permission: what})
			if err == nil {
				m = &out.GrantPermission.AdminMemberFields
			}
			return err
		case "revoke":
			out, err := client.RevokePermission(a.ctx, g, &client.PermissionInput{Email: email, Permission: what})
			if err == nil {
				m = &out.RevokePermission.AdminMemberFields
			}
			return err
		case "join":
			out, err := client.AddGroupMember(a.ctx, g, &client.GroupMemberInput{Email: email, Group: what})
			if err == nil {
				m = &out.AddGroupMember.AdminMemberFields
			}
			return err
		default:
			out, err := client.RemoveGroupMember(a.ctx, g, &client.GroupMemberInput{Email: email, Group: what})
			if err == nil {
				m = &out.RemoveGroupMember.AdminMemberFields
			}
			return err
		}
	})
	if err == nil {
		a.printMember(m)
	}
	return err
}

// eventsList prints the admin record newest first: the changes of the
// areas whose permission the caller holds.
func (a *adminCLI) eventsList(args []string) error {
	fs := flag.NewFlagSet("events list", flag.ContinueOnError)
	limit := fs.Int("limit", 100, "how many changes to print, newest first (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *limit < 0 {
		return errors.New("events list: --limit is 0 or more")
	}
	w := tabwriter.NewWriter(a.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tACTOR\tAREA\tACTION\tSUBJECT\tDETAIL")
	var after *string
	for printed := 0; ; {
		first := 500
		if *limit > 0 {
			first = min(first, *limit-printed)
		}
		var out *client.AdminEventsResponse
		err := a.c.Query(a.ctx, func(g graphql.Client) (err error) { out, err = client.AdminEvents(a.ctx, g, &first, after); return })
		if err != nil {
			return err
		}
		for _, e := range out.AdminEvents.Nodes {
			actor := ""
			if e.Actor != nil {
				actor = e.Actor.Email
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), actor, strings.ToLower(string(e.Area)), e.Action, e.Subject, e.Detail)
		}
		printed += len(out.AdminEvents.Nodes)
		if !out.AdminEvents.PageInfo.HasNextPage || (*limit > 0 && printed >= *limit) {
			return w.Flush()
		}
		after = out.AdminEvents.PageInfo.EndCursor
	}
}

func (a *adminCLI) printAgent(ag *client.AdminAgentFields) {
	fmt.Fprintf(a.out, "%s\t%s\n", ag.Slug, ag.Name)
	for _, v := range ag.Versions {
		fmt.Fprintf(a.out, "  v%d\t%s\t%s\ttools=%s\tspecialists=%s\n", v.Version, v.Controller, v.ModelRoute, strings.Join(v.Tools, ","), strings.Join(v.Specialists, ","))
	}
}

func (a *adminCLI) agentsList() error {
	var out *client.AdminAgentsResponse
	err := a.c.Query(a.ctx, func(g graphql.Client) (err error) { out, err = client.AdminAgents(a.ctx, g); return })
	if err != nil {
		return err
	}
	for _, ag := range out.AdminAgents {
		a.printAgent(&ag.AdminAgentFields)
	}
	return nil
}

func (a *adminCLI) agentVersion(verb string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("agents %s: SLUG and flags", verb)
	}
	slug := args[0]
	fs := flag.NewFlagSet("agents "+verb, flag.ContinueOnError)
	name := fs.String("name", slug, "the agent's name (create)")
	controller := fs.String("controller", "react", "the runtime controller: single or react")
	route := fs.String("route", "builtin", "the model route: builtin, openai or openai:<model>")
	effort := fs.String("effort", "", "low, medium or high")
	promptFile := fs.String("prompt-file", "", "a file holding the system prompt")
	var tools, specialists, budgets multiFlag
	fs.Var(&tools, "tool", "a tool it may ask for (repeat)")
	fs.Var(&specialists, "specialist", "a specialist it may delegate to (repeat)")
	fs.Var(&budgets, "budget", "a budget, name=number (repeat)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	v := &client.AgentVersionInput{Controller: *controller, ModelRoute: *route, Tools: tools, Specialists: specialists}
	if *effort != "" {
		v.Effort = effort
	}
	if *promptFile != "" {
		p, err := os.ReadFile(*promptFile)
		if err != nil {
			return err
		}
		s := string(p)
		v.SystemPrompt = &s
	}
	if len(budgets) > 0 {
		b := map[string]int64{}
		for _, kv := range budgets {
			k, n, ok := strings.Cut(kv, "=")
			var num int64
			if _, err := fmt.Sscan(n, &num); !ok || err != nil {
				return fmt.Errorf("--budget %q: want name=number", kv)
			}
			b[k] = num
		}
		raw, _ := json.Marshal(b)
		r := json.RawMessage(raw)
		v.Budgets = &r
	}
	var ag *client.AdminAgentFields
	err := a.mutate(func(g graphql.Client) error {
		if verb == "create" {
			out, err := client.CreateAgent(a.ctx, g, &client.CreateAgentInput{Slug: slug, Name: *name, Version: v})
			if err == nil {
				ag = &out.CreateAgent.AdminAgentFields
			}
			return err
		}
		out, err := client.AddAgentVersion(a.ctx, g, &client.AddAgentVersionInput{Slug: slug, Version: v})
		if err == nil {
			ag = &out.AddAgentVersion.AdminAgentFields
		}
		return err
	})
	if err == nil {
		a.printAgent(ag)
	}
	return err
}
