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

const adminUsage = `usage: turngate admin <command> [flags] [arguments]

Flags go anywhere on the line, before or after the command: --url URL (the
server), --as EMAIL (dev mode) and --data DIR (its data folder), and the
command's own. After --, every word is an argument.

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

// adminCommand is one `turngate admin` command: setup declares its flags
// on fs and returns what runs it with the words that are not flags, of
// which it takes min to max (max -1: any number), as args says ("": none).
type adminCommand struct {
	args     string
	min, max int
	setup    func(a *adminCLI, fs *flag.FlagSet) func(args []string) error
}

// noFlags is a command without flags of its own.
func noFlags(run func(a *adminCLI, args []string) error) func(*adminCLI, *flag.FlagSet) func([]string) error {
	return func(a *adminCLI, _ *flag.FlagSet) func([]string) error {
		return func(args []string) error { return run(a, args) }
	}
}

// memberChange is `members grant|revoke|join|leave EMAIL WHAT`.
func memberChange(verb string) adminCommand {
	return adminCommand{"EMAIL " + map[bool]string{true: "PERMISSION", false: "GROUP"}[verb == "grant" || verb == "revoke"], 2, 2,
		noFlags(func(a *adminCLI, args []string) error { return a.memberChange(verb, args[0], args[1]) })}
}

// agentVersion is `agents create|version SLUG --flags`.
func agentVersion(verb string) adminCommand {
	return adminCommand{"SLUG", 1, 1, func(a *adminCLI, fs *flag.FlagSet) func([]string) error { return a.agentVersion(verb, fs) }}
}

var adminCommands = map[string]adminCommand{
	"docs add":       {"FILE|FOLDER ...", 1, -1, (*adminCLI).docsAdd},
	"docs list":      {"", 0, 0, noFlags(func(a *adminCLI, _ []string) error { return a.docsList() })},
	"docs replace":   {"ID FILE", 2, 2, (*adminCLI).docsReplace},
	"docs readers":   {"ID", 1, 1, (*adminCLI).docsReaders},
	"docs rm":        {"ID", 1, 1, noFlags((*adminCLI).docsRm)},
	"members list":   {"", 0, 0, noFlags(func(a *adminCLI, _ []string) error { return a.membersList() })},
	"members grant":  memberChange("grant"),
	"members revoke": memberChange("revoke"),
	"members join":   memberChange("join"),
	"members leave":  memberChange("leave"),
	"agents list":    {"", 0, 0, noFlags(func(a *adminCLI, _ []string) error { return a.agentsList() })},
	"agents create":  agentVersion("create"),
	"agents version": agentVersion("version"),
	"agents roster":  {"EMAIL AGENT [SPECIALIST ...]", 2, -1, noFlags((*adminCLI).agentsRoster)},
	"events list":    {"", 0, 0, (*adminCLI).eventsList},
}

// adminCmd is `turngate admin`: the admin surface over the GraphQL API,
// as the member --as (dev) or TURNGATE_IDENTITY names. Flags may come
// anywhere on the line, as kubectl, gh and docker take them: the
// command's flag set holds the client flags as well as its own.
func adminCmd(ctx context.Context, cfg server.Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	cf := newClientFlags(cfg)
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	name := strings.Join(rest[:min(2, len(rest))], " ")
	cmd, ok := adminCommands[name]
	if !ok {
		return fmt.Errorf("unknown admin command %q (see turngate admin --help)", name)
	}
	sub := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	sub.SetOutput(stderr)
	sub.Usage = func() {
		fmt.Fprintf(stderr, "usage: turngate admin %s [flags]\n", strings.TrimSpace(name+" "+cmd.args))
		sub.PrintDefaults()
	}
	cf.register(sub)
	a := &adminCLI{ctx: ctx, out: stdout}
	run := cmd.setup(a, sub)
	operands, err := parseAnywhere(sub, rest[2:])
	if err != nil {
		return err
	}
	if len(operands) < cmd.min || (cmd.max >= 0 && len(operands) > cmd.max) {
		want := cmd.args
		if want == "" {
			want = "no arguments"
		}
		return fmt.Errorf("admin %s: want %s, got %d (see turngate admin %s --help)", name, want, len(operands), name)
	}
	c, err := cf.client(cfg)
	if err != nil {
		return err
	}
	a.c, a.g = c, c.GraphQL()
	return run(operands)
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

func (a *adminCLI) docsAdd(fs *flag.FlagSet) func([]string) error {
	var readers multiFlag
	fs.Var(&readers, "reader", "who may read the documents: an email or group:<name> (repeat)")
	title := fs.String("title", "", "the title (one file only)")
	return func(args []string) error { return a.addDocs(args, *title, readers) }
}

func (a *adminCLI) addDocs(args []string, title string, readers []string) error {
	files, err := readDocFiles(args, title)
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

func (a *adminCLI) docsReplace(fs *flag.FlagSet) func([]string) error {
	title := fs.String("title", "", "a new title (default: keep it)")
	return func(args []string) error { return a.replaceDoc(args[0], args[1], *title) }
}

func (a *adminCLI) replaceDoc(id, file, title string) error {
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	in := &client.ReplaceDocumentInput{DocumentId: id, Body: string(body)}
	if title != "" {
		in.Title = &title
	}
	var out *client.ReplaceDocumentResponse
	err = a.mutate(func(g graphql.Client) (err error) { out, err = client.ReplaceDocument(a.ctx, g, in); return })
	if err == nil {
		fmt.Fprintf(a.out, "%s\t%s\t%s\n", out.ReplaceDocument.Id, out.ReplaceDocument.Title, out.ReplaceDocument.Digest)
	}
	return err
}

func (a *adminCLI) docsReaders(fs *flag.FlagSet) func([]string) error {
	var readers multiFlag
	fs.Var(&readers, "reader", "who may read it (repeat; none: nobody)")
	return func(args []string) error { return a.setReaders(args[0], readers) }
}

func (a *adminCLI) setReaders(id string, readers []string) error {
	var out *client.SetDocumentReadersResponse
	err := a.mutate(func(g graphql.Client) (err error) {
		out, err = client.SetDocumentReaders(a.ctx, g, &client.SetDocumentReadersInput{DocumentId: id, Readers: append([]string{}, readers...)})
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
func (a *adminCLI) eventsList(fs *flag.FlagSet) func([]string) error {
	limit := fs.Int("limit", 100, "how many changes to print, newest first (0: all)")
	return func([]string) error { return a.listEvents(*limit) }
}

func (a *adminCLI) listEvents(limit int) error {
	if limit < 0 {
		return errors.New("events list: --limit is 0 or more")
	}
	w := tabwriter.NewWriter(a.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tACTOR\tAREA\tACTION\tSUBJECT\tDETAIL")
	var after *string
	for printed := 0; ; {
		first := 500
		if limit > 0 {
			first = min(first, limit-printed)
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
		if !out.AdminEvents.PageInfo.HasNextPage || (limit > 0 && printed >= limit) {
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

// agentFlags are the flags of agents create|version.
type agentFlags struct {
	name, controller, route, effort, promptFile string
	tools, specialists, budgets                 multiFlag
}

func (a *adminCLI) agentVersion(verb string, fs *flag.FlagSet) func([]string) error {
	var f agentFlags
	fs.StringVar(&f.name, "name", "", "the agent's name (create; default its slug)")
	fs.StringVar(&f.controller, "controller", "react", "the runtime controller: single or react")
	fs.StringVar(&f.route, "route", "builtin", "the model route: builtin, openai or openai:<model>")
	fs.StringVar(&f.effort, "effort", "", "low, medium or high")
	fs.StringVar(&f.promptFile, "prompt-file", "", "a file holding the system prompt")
	fs.Var(&f.tools, "tool", "a tool it may ask for (repeat)")
	fs.Var(&f.specialists, "specialist", "a specialist it may delegate to (repeat)")
	fs.Var(&f.budgets, "budget", "a budget, name=number (repeat)")
	return func(args []string) error { return a.writeAgentVersion(verb, args[0], &f) }
}

func (a *adminCLI) writeAgentVersion(verb, slug string, f *agentFlags) error {
	name, effort, tools, specialists, budgets := f.name, f.effort, []string(f.tools), []string(f.specialists), f.budgets
	if name == "" {
		name = slug
	}
	v := &client.AgentVersionInput{Controller: f.controller, ModelRoute: f.route, Tools: tools, Specialists: specialists}
	if effort != "" {
		v.Effort = &effort
	}
	if f.promptFile != "" {
		p, err := os.ReadFile(f.promptFile)
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
			out, err := client.CreateAgent(a.ctx, g, &client.CreateAgentInput{Slug: slug, Name: name, Version: v})
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

func (a *adminCLI) docsRm(args []string) error {
	return a.mutate(func(g graphql.Client) error {
		_, err := client.DeleteDocument(a.ctx, g, &client.DeleteDocumentInput{DocumentId: args[0]})
		return err
	})
}

func (a *adminCLI) agentsRoster(args []string) error {
	var out *client.SetMemberRosterResponse
	err := a.mutate(func(g graphql.Client) (err error) {
		out, err = client.SetMemberRoster(a.ctx, g, &client.MemberRosterInput{Email: args[0], Agent: args[1], Specialists: append([]string{}, args[2:]...)})
		return
	})
	if err == nil {
		a.printMember(&out.SetMemberRoster.AdminMemberFields)
	}
	return err
}
