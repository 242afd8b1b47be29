package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
)

// TestAdminLoadsAFolder: `turngate admin docs add` loads a thousand
// documents from a folder, and a turn retrieves and cites one of them.
func TestAdminLoadsAFolder(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	w := e2etest.NewWorld(t, bin, "turngate-admin-")
	// A thousand admin mutations from one operator: faster than a
	// person, past the command budget (the CLI's pacing is tested apart).
	r := w.Start(t, "r1", append([]string{"TURNGATE_MODEL_PACE=0s"}, servertest.UnlimitedCommandsEnv...)...)
	dir := t.TempDir()
	for i := range 1000 {
		body := fmt.Sprintf("# Note %04d\n\nThe codeword of note %d is amber-%d.\n\nIt was filed in batch %d.\n", i, i, i, i%7)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("note-%04d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "admin", "--url", r.Base, "--as", alice, "--data", w.DataDir, "docs", "add", "--reader", alice, "--reader", "group:eng", dir)
	cmd.Env = e2etest.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("admin docs add: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\tNote "); n != 1000 {
		t.Fatalf("the CLI reported %d documents added, want 1000", n)
	}
	var docs, passages int
	if err := w.DB.QueryRow(`SELECT (SELECT count(*) FROM documents WHERE title LIKE 'Note %'), (SELECT count(*) FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.title LIKE 'Note %')`).Scan(&docs, &passages); err != nil {
		t.Fatal(err)
	}
	// Two passages each: the "# Note" title line opens the first, it is
	// not a passage of its own.
	if docs != 1000 || passages != 2000 {
		t.Fatalf("%d documents with %d passages, want 1000 with 2000", docs, passages)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := w.Client(t, r.Base, alice)
	notes := servertest.Rooms(t, c)["Alice's notes"].ID
	turn := servertest.SubmitAs(t, ctx, c, notes, "What is the codeword of note 417?", "codeword")
	done := servertest.AwaitTurnEnd(t, ctx, c, turn)
	found := false
	for _, cite := range done.Citations {
		found = found || (cite.Source == "Note 0417" && strings.Contains(cite.Passage, "amber-417"))
	}
	if done.State != "COMPLETED" || !found {
		t.Fatalf("turn %s cites %+v, want Note 0417's codeword", done.State, done.Citations)
	}
	// The CLI lists them too.
	list := exec.Command(bin, "admin", "--url", r.Base, "--as", alice, "--data", w.DataDir, "docs", "list")
	list.Env = e2etest.CleanEnv()
	listed, err := list.Output()
	if err != nil || strings.Count(string(listed), "Note ") != 1000 {
		t.Fatalf("docs list: %v, %d notes", err, strings.Count(string(listed), "Note "))
	}
}

// TestAdminDocsAddChecksFirst: `turngate admin docs add` reads and checks
// every file before it adds any. A folder holding a symbolic link out of
// it, a file that is not UTF-8, one with a NUL or one whose title has
// nothing visible is refused as a whole, naming each bad file, and adds
// nothing; dot-files and dot-folders are left out; a symbolic link inside
// the folder is read. Run again, it adds nothing twice: a file whose
// title and content digest a document already has is reported unchanged.
func TestAdminDocsAddChecksFirst(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	h := servertest.New(t, nil)
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	docsAdd := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"admin", "--url", h.Base, "--as", alice, "--data", h.Config.DataDir, "docs", "add", "--reader", alice}, args...)...)
		cmd.Env = e2etest.CleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	outside := t.TempDir()
	write(filepath.Join(outside, "passwd.txt"), "root:x:0:0:root:/root:/bin/bash\n")
	dir := t.TempDir()
	write(filepath.Join(dir, "handbook.md"), "# Handbook\n\nThe office opens at nine.\n")
	write(filepath.Join(dir, "team", "onboarding.md"), "# Onboarding\n\nAsk for a badge on day one.\n")
	write(filepath.Join(dir, ".env.md"), "# Secrets\n\nAPI_KEY=hunter2\n")
	write(filepath.Join(dir, ".git", "notes.md"), "# Git notes\n\nnot a document\n")
	if err := os.Symlink(filepath.Join(dir, "team", "onboarding.md"), filepath.Join(dir, "welcome.md")); err != nil {
		t.Fatal(err)
	}

	before := servertest.AdminState(t, h)
	bad := []struct{ name, file, body, says string }{
		{"a link out of the folder", "passwd.md", "", "outside"},
		{"invalid UTF-8", "latin1.md", "# Caf\xe9\n\nCr\xe8me br\xfbl\xe9e.\n", "UTF-8"},
		{"a NUL", "nul.txt", "# Nul\n\nbefore\x00after\n", "NUL"},
		{"an invisible title", "blank.md", "# \u200b\u2060\u200d\n\nA body.\n", "visible"},
	}
	for _, tt := range bad {
		path := filepath.Join(dir, tt.file)
		if tt.body == "" {
			if err := os.Symlink(filepath.Join(outside, "passwd.txt"), path); err != nil {
				t.Fatal(err)
			}
		} else {
			write(path, tt.body)
		}
	}
	out, err := docsAdd(dir)
	if err == nil {
		t.Fatalf("docs add of a folder with bad files succeeded:\n%s", out)
	}
	for _, tt := range bad {
		if !strings.Contains(out, tt.file) || !strings.Contains(out, tt.says) {
			t.Errorf("%s: the refusal does not name %s and say %q:\n%s", tt.name, tt.file, tt.says, out)
		}
	}
	if strings.Contains(out, "root:x") {
		t.Errorf("the refusal shows the linked file's content:\n%s", out)
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatalf("a refused import added documents:\n%s\n%s", before, after)
	}
	// Each file alone is refused too (but for the link: a file named on
	// the command line is read as named), and --title is checked like a
	// heading.
	for _, tt := range bad {
		if tt.body != "" {
			if out, err := docsAdd(filepath.Join(dir, tt.file)); err == nil {
				t.Errorf("%s alone: added\n%s", tt.name, out)
			}
		}
		os.Remove(filepath.Join(dir, tt.file))
	}
	if out, err := docsAdd("--title", "\u3164\u200b", filepath.Join(dir, "handbook.md")); err == nil || !strings.Contains(out, "visible") {
		t.Errorf("an invisible --title: %v\n%s", err, out)
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatalf("a refused file added documents:\n%s\n%s", before, after)
	}

	titles := func() map[string]int {
		t.Helper()
		rows, err := h.DB.Query(`SELECT title FROM documents`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := map[string]int{}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			n[s]++
		}
		return n
	}
	out, err = docsAdd(dir)
	if err != nil {
		t.Fatalf("docs add of the clean folder: %v\n%s", err, out)
	}
	got := titles()
	if got["Handbook"] != 1 || got["Onboarding"] != 1 || got["Secrets"] != 0 || got["Git notes"] != 0 {
		t.Fatalf("documents by title %v: want Handbook and Onboarding once each, no dot-file", got)
	}
	added := servertest.AdminState(t, h)
	again, err := docsAdd(dir)
	if err != nil {
		t.Fatalf("docs add again: %v\n%s", err, again)
	}
	if after := servertest.AdminState(t, h); after != added {
		t.Fatalf("a second run changed the documents:\n%s\n%s", added, after)
	}
	if strings.Count(again, "unchanged") != 3 {
		t.Fatalf("the second run reported\n%s\nwant the three files unchanged", again)
	}
	// New content under the same title is a new document (docs replace
	// updates one in place).
	write(filepath.Join(dir, "handbook.md"), "# Handbook\n\nThe office opens at ten.\n")
	if out, err := docsAdd(dir); err != nil {
		t.Fatalf("docs add of changed content: %v\n%s", err, out)
	}
	if got := titles(); got["Handbook"] != 2 || got["Onboarding"] != 1 {
		t.Fatalf("documents by title after a change %v: want a second Handbook only", got)
	}
}

// TestAdminCLIWaitsOutTheCommandBudget: every admin mutation spends the
// operator's command budget. The CLI waits out a RATE_LIMITED answer (the
// server ran nothing) and sends the mutation again, so a folder larger
// than the bucket loads whole, each document once.
func TestAdminCLIWaitsOutTheCommandBudget(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	w := e2etest.NewWorld(t, bin, "turngate-admin-budget-")
	r := w.Start(t, "r1", "TURNGATE_COMMAND_BURST=2", "TURNGATE_COMMAND_RATE=20")
	dir := t.TempDir()
	const n = 12
	for i := range n {
		body := fmt.Sprintf("# Budget note %02d\n\nThe codeword of budget note %d is teal-%d.\n", i, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("budget-%02d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "admin", "--url", r.Base, "--as", alice, "--data", w.DataDir, "docs", "add", "--reader", alice, dir)
	cmd.Env = e2etest.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("admin docs add past the budget: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "\tBudget note "); got != n {
		t.Fatalf("the CLI reported %d documents added, want %d:\n%s", got, n, out)
	}
	var docs, titles int
	if err := w.DB.QueryRow(`SELECT count(*), count(DISTINCT title) FROM documents WHERE title LIKE 'Budget note %'`).Scan(&docs, &titles); err != nil {
		t.Fatal(err)
	}
	if docs != n || titles != n {
		t.Fatalf("%d documents under %d titles, want %d, each once", docs, titles, n)
	}
}
