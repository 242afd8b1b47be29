package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/outcome"
)

// terminal is `turngate chat` in a real pseudo-terminal.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	mark int // where the next wait starts reading
	done chan error
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>78]`)

// startChat runs bin chat with args in a 200×50 terminal.
func startChat(t *testing.T, bin string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"chat"}, args...)...)
	cmd.Env = append(e2etest.CleanEnv(), "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, cmd: cmd, tty: tty, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { term.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
	})
	return term
}

// screen is everything the terminal printed since the mark, escapes removed.
func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return ansi.ReplaceAllString(term.out.String()[term.mark:], "")
}

// all is everything the terminal printed, escapes removed.
func (term *terminal) all() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return ansi.ReplaceAllString(term.out.String(), "")
}

// waitFor waits until the terminal has printed want since the mark.
func (term *terminal) waitFor(ctx context.Context, want string) {
	term.t.Helper()
	err := browserPoll(ctx, "the terminal shows "+want, 20*time.Millisecond, func() (bool, error) {
		return strings.Contains(term.screen(), want), nil
	})
	if err != nil {
		s := term.screen()
		term.t.Fatalf("%v; the terminal's last output:\n%s", err, s[max(0, len(s)-3000):])
	}
}

// markNow makes later waits look only at what comes after now.
func (term *terminal) markNow() {
	term.mu.Lock()
	term.mark = term.out.Len()
	term.mu.Unlock()
}

func (term *terminal) typeKeys(s string) {
	term.t.Helper()
	if _, err := term.tty.Write([]byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

// TestChatInATerminal: `turngate chat` in a real pseudo-terminal: the
// answer streams with its tool activity and sources; typing while the
// turn runs steers it; Ctrl-C stops the running turn; the stream resumes
// after every replica restarts; a second Ctrl-C quits.
func TestChatInATerminal(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := g.client(t, alice, nil)
	team := roomOf(t, ctx, a, "Team room")
	// Without --room, the picker: Enter opens the highlighted room.
	picker := startChat(t, g.w.Bin, "--url", g.f.base, "--as", alice, "--data", g.w.DataDir)
	picker.waitFor(ctx, "choose a room")
	picker.waitFor(ctx, "> Alice's notes")
	picker.typeKeys("\x1b[B\r") // down to the Team room, Enter
	picker.waitFor(ctx, "· Team room · live")

	term := startChat(t, g.w.Bin, "--url", g.f.base, "--as", alice, "--data", g.w.DataDir, "--room", team)
	term.waitFor(ctx, "· Team room · live")
	// idle waits until no turn of alice's runs: the help line, as the
	// terminal last wrote it, says Enter sends again. (The renderer
	// rewrites a line only when it changes.)
	idle := func() {
		t.Helper()
		if err := browserPoll(ctx, "no turn of alice's runs", 20*time.Millisecond, func() (bool, error) {
			all := term.all()
			return strings.LastIndex(all, "Enter sends · Ctrl-C quits") > strings.LastIndex(all, "Your turn is running"), nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	term.markNow()
	term.typeKeys("When is the launch?\r")
	term.waitFor(ctx, "· retrieval ok")
	term.waitFor(ctx, "[1] Launch plan:")
	idle()

	term.markNow()
	term.typeKeys("Tell me about the launch, at length?\r")
	term.waitFor(ctx, "You wrote: \"Tell me")
	term.typeKeys("mention the weather\r")
	term.waitFor(ctx, `steer "mention the weather": delivered`)
	term.waitFor(ctx, `As you asked while I worked: "mention the weather"`)
	idle()

	term.markNow()
	term.typeKeys("A long answer I will stop?\r")
	term.waitFor(ctx, "You wrote: \"A long answer")
	term.typeKeys("\x03")
	term.waitFor(ctx, "(stopped)")
	idle()

	term.markNow()
	term.typeKeys("What survives a restart?\r")
	term.waitFor(ctx, "You wrote: \"What survives")
	g.f.killAll(false)
	g.f.add()
	term.waitFor(ctx, "reconnecting")
	term.waitFor(ctx, "· Team room · live")
	// Every replica died mid-answer: attempt 2 wrote the answer again from
	// its start, and the screen marks attempt 1's text interrupted.
	term.waitFor(ctx, `✗ interrupted (attempt 1): You wrote: "What survives`)
	term.waitFor(ctx, "the same conversation always streams the same answer.")
	idle()

	term.typeKeys("\x03")
	select {
	case err := <-term.done:
		if err != nil {
			t.Fatalf("chat exited with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("a Ctrl-C with no turn running did not quit")
	}
}

// TestChatOnceForScripts: `turngate chat -m` prints the streamed answer
// and exits 0 when the turn completes, 2 when it is cancelled.
func TestChatOnceForScripts(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := g.client(t, alice, nil)
	team := roomOf(t, ctx, a, "Team room")
	run := func(text string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, g.w.Bin, "chat", "--url", g.f.base, "--as", alice, "--data", g.w.DataDir, "--room", team, "-m", text)
		cmd.Env = e2etest.CleanEnv()
		return cmd
	}
	var stdout, stderr bytes.Buffer
	cmd := run("When is the launch?")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chat -m: %v\n%s", err, stderr.String())
	}
	turns, err := a.Journal(ctx, team, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, e := range turns {
		if e.Kind == client.JournalKindTurnAnswer {
			last = e.Answer.Text
		}
	}
	if stdout.String() != last+"\n" || !strings.Contains(stderr.String(), "[1] Launch plan") {
		t.Fatalf("stdout %q, want the answer %q; stderr %q", stdout.String(), last, stderr.String())
	}

	// Cancelled from elsewhere while it streams: exit status 2.
	long := run("A long answer someone will stop?")
	long.Stdout, long.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	f := goFollow(t, ctx, a, team)
	var id string
	f.until(t, ctx, "the scripted turn runs", func(f *goFollower) bool {
		for _, v := range f.fold.Turns() {
			if v.Input == "A long answer someone will stop?" && v.Answer != "" {
				id = v.ID
				return true
			}
		}
		return false
	})
	if _, _, err := a.Cancel(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	err = long.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("a cancelled turn: %v, want exit status 2", err)
	}
}

// TestChatInvitesAndShowsWithheldTurns: in `turngate chat` the owner of a
// shared room adds a member with /invite and is told how many earlier
// turns the newcomer reads withheld; the newcomer's terminal shows such a
// turn as the withheld notice and nothing of its answer, and is told that
// only the owner may invite. `chat -m` whose answer is withheld at
// publication (someone joined who may not read its sources) prints the
// notice and says so.
func TestChatInvitesAndShowsWithheldTurns(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := g.client(t, alice, nil)
	if _, err := g.client(t, "carol@example.com", nil).Me(ctx); err != nil {
		t.Fatal(err)
	}
	room, err := a.CreateConversation(ctx, "Planning", client.ConversationKindShared)
	if err != nil {
		t.Fatal(err)
	}
	f := goFollow(t, ctx, a, room.Id)
	bands, err := a.Submit(ctx, room.Id, "What are the engineering bands for 2027?", client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.ended(t, ctx, bands.Id)
	drewOn(t, ctx, g.w.DB, room.Id, bands.Id, "Compensation bands 2027")

	owner := startChat(t, g.w.Bin, "--url", g.f.base, "--as", alice, "--data", g.w.DataDir, "--room", room.Id)
	owner.waitFor(ctx, "· Planning · live")
	owner.waitFor(ctx, "95,000")
	owner.waitFor(ctx, "/invite EMAIL adds a member")
	owner.markNow()
	owner.typeKeys("/invite bob@example.com\r")
	owner.waitFor(ctx, "bob@example.com joined the room. 1 earlier turn drew on documents they may not read: they will see it withheld.")

	newcomer := startChat(t, g.w.Bin, "--url", g.f.base, "--as", bob, "--data", g.w.DataDir, "--room", room.Id)
	newcomer.waitFor(ctx, "· Planning · live")
	newcomer.waitFor(ctx, outcome.WithheldAnswer)
	newcomer.markNow()
	newcomer.typeKeys("/invite carol@example.com\r")
	newcomer.waitFor(ctx, "Only the room's owner can invite.")
	if s := newcomer.all(); strings.Contains(s, "95,000") || strings.Contains(s, "/invite EMAIL") {
		t.Fatalf("bob's terminal shows the withheld answer or the owner's help:\n%s", s)
	}

	var stdout, stderr bytes.Buffer
	once := exec.CommandContext(ctx, g.w.Bin, "chat", "--url", g.f.base, "--as", alice, "--data", g.w.DataDir, "--room", room.Id, "-m", "When is the launch?")
	once.Env, once.Stdout, once.Stderr = e2etest.CleanEnv(), &stdout, &stderr
	if err := once.Start(); err != nil {
		t.Fatal(err)
	}
	f.until(t, ctx, "the launch answer streams", func(f *goFollower) bool {
		for _, v := range f.fold.Turns() {
			if v.Input == "When is the launch?" && v.Answer != "" {
				return true
			}
		}
		return false
	})
	if _, err := a.AddRoomMember(ctx, room.Id, "carol@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := once.Wait(); err != nil {
		t.Fatalf("chat -m: %v\n%s", err, stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), "\n"+outcome.WithheldAnswer+"\n") || !strings.Contains(stderr.String(), "[the answer is withheld from the room]") ||
		strings.Contains(stderr.String(), "restarts") {
		t.Fatalf("chat -m of a withheld answer: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
