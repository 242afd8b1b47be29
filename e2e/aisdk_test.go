package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// exampleBuild builds examples/ai-sdk-chat once per package run: the
// TypeScript client first (the example depends on it as a file:
// package, through its built exports), then the example (npm ci when its
// node_modules is missing, type-check, esbuild). dist is not committed: the
// example needs Node anyway, to serve it.
var exampleBuild struct {
	once sync.Once
	dir  string
	err  error
}

func aisdkExample(t *testing.T) string {
	t.Helper()
	buildTSClient(t)
	npm := nodeTool(t, "npm")
	exampleBuild.once.Do(func() {
		// The example builds against clients/ts/dist, which nothing may
		// rewrite meanwhile.
		clientsTS.Lock()
		defer clientsTS.Unlock()
		dir, err := filepath.Abs("../examples/ai-sdk-chat")
		if err != nil {
			exampleBuild.err = err
			return
		}
		if exampleBuild.err = npmTypecheckAndBuild(npm, dir); exampleBuild.err != nil {
			return
		}
		exampleBuild.dir = dir
	})
	if exampleBuild.err != nil {
		t.Fatal(exampleBuild.err)
	}
	return exampleBuild.dir
}

// serveExample starts the example's own server (serve.mjs: the built page,
// with /graphql and turngate's dev page passed through to upstream) and
// returns its address.
func serveExample(t *testing.T, dir, upstream string) string {
	t.Helper()
	cmd := exec.Command(nodeTool(t, "node"), "serve.mjs")
	cmd.Dir = dir
	cmd.Env = append(e2etest.CleanEnv(), "TURNGATE_URL="+upstream, "PORT=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = e2etest.NewPrefixWriter(t, "serve.mjs: ")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("serve.mjs printed no address: %v", err)
	}
	go io.Copy(io.Discard, r) // ends when the process does
	return strings.TrimSpace(line)
}

// aiMessage is a message as the example's transcript shows it.
type aiMessage struct {
	Role    string `json:"role"`
	TurnID  string `json:"turnId"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	// Text is the answer as shown: every text part; Current leaves out
	// the text of an interrupted attempt.
	Text    string `json:"text"`
	Current string `json:"current"`
	Tools   string `json:"tools"`
	Sources int    `json:"sources"`
}

// messages reads the example's transcript.
func aiMessages(p *chatPage) ([]aiMessage, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[[]aiMessage](`(() => {
  const region = document.querySelector('section[aria-label="Transcript"]');
  if (!region) return [];
  const text = (a, sel) => [...a.querySelectorAll(sel)].map((x) => x.innerText).join('');
  return [...region.querySelectorAll('article')].map((a) => ({
    role: a.dataset.role,
    turnId: a.dataset.turnId ?? '',
    state: a.dataset.state ?? '',
    attempt: Number(a.dataset.attempt ?? 0),
    text: text(a, '.text'),
    current: text(a, '.text:not(.interrupted)'),
    tools: text(a, '.tool'),
    sources: a.querySelectorAll('.sources li').length,
  }));
})()`))
}

// answerTo waits until the transcript holds an answer to question (the
// assistant message after the user's) of which cond holds, and returns it.
// Every state of it seen on the way is passed to seen, when set.
func answerTo(p *chatPage, question, what string, cond func(aiMessage) bool, seen func(aiMessage)) aiMessage {
	p.t.Helper()
	var got aiMessage
	var last []aiMessage
	err := browserPoll(p.ctx, what, 20*time.Millisecond, func() (bool, error) {
		ms, err := aiMessages(p)
		if err != nil {
			return false, err
		}
		last = ms
		for i, m := range ms {
			if m.Role != "user" || m.Text != question || i+1 == len(ms) || ms[i+1].Role != "assistant" {
				continue
			}
			a := ms[i+1]
			if seen != nil {
				seen(a)
			}
			if cond(a) {
				got = a
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		p.t.Fatalf("%v; transcript: %+v", err, last)
	}
	return got
}

// turnState reads a turn's state, answer and terminal reason from the server.
func turnState(t *testing.T, ctx context.Context, c *gqlclient.Client, id string) (state, answer, reason string) {
	t.Helper()
	var out struct {
		Turn struct {
			State    string
			Answer   *string
			Terminal *struct{ Reason string }
		}
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer terminal { reason } } }`, map[string]any{"id": id}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Turn.Answer != nil {
		answer = *out.Turn.Answer
	}
	if out.Turn.Terminal != nil {
		reason = out.Turn.Terminal.Reason
	}
	return out.Turn.State, answer, reason
}

// acceptedCount counts the room's turns whose message is text, in its journal.
func acceptedCount(t *testing.T, ctx context.Context, c *gqlclient.Client, room, text string) int {
	t.Helper()
	n, after := 0, 0
	for {
		var out struct {
			Journal struct {
				Entries []struct {
					Seq  int
					Kind string
					Text *string
				}
				HasMore bool
			}
		}
		if err := c.Do(ctx, `query($id: ID!, $after: Int) { journal(conversationId: $id, after: $after, first: 500) { entries { seq kind text } hasMore } }`,
			map[string]any{"id": room, "after": after}, &out); err != nil {
			t.Fatal(err)
		}
		for _, e := range out.Journal.Entries {
			after = e.Seq
			if e.Kind == "TURN_ACCEPTED" && e.Text != nil && *e.Text == text {
				n++
			}
		}
		if !out.Journal.HasMore {
			return n
		}
	}
}

// TestAISDKChat drives examples/ai-sdk-chat (React, the AI SDK's useChat
// with @turngate/client/ai-sdk as its transport, served by its own
// serve.mjs) in Chromium against two replicas behind one front door:
// a sent message streams and completes as the server has it; a reload
// mid-answer resumes it (useChat's resume) and it completes once, with
// nothing repeated; a kill -9 of the serving replica mid-answer does not
// interrupt the page, and the answer completes through the other; Stop
// cancels the turn, as the server records it.
func TestAISDKChat(t *testing.T) {
	t.Parallel()
	dir := aisdkExample(t)
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	w := e2etest.NewWorld(t, bin, "turngate-aisdk-")
	f := newFrontDoor(t, w, 2, "TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=60ms")
	base := serveExample(t, dir, f.base)
	a := w.Client(t, f.base, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 5*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 4*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, base, "/#room="+team)
	running := func(m aiMessage) bool { return m.State == "RUNNING" }

	// Send: the answer streams (text before the turn ends), with its tool
	// activity and sources, and ends as the server's answer.
	q1 := "When is the launch?"
	page.send(q1)
	var streamed []string
	answerTo(page, q1, "the answer streams", func(m aiMessage) bool { return running(m) && m.Text != "" }, nil)
	done := answerTo(page, q1, "the answer completes", func(m aiMessage) bool { return m.State == "COMPLETED" }, func(m aiMessage) {
		if running(m) {
			streamed = append(streamed, m.Text)
		}
	})
	state, answer, _ := turnState(t, ctx, a, done.TurnID)
	if state != "COMPLETED" || done.Text != answer {
		t.Fatalf("the page shows %q; the server has %s %q", done.Text, state, answer)
	}
	for _, s := range streamed {
		if !strings.HasPrefix(answer, s) {
			t.Fatalf("while streaming the page showed %q, which is not how %q starts", s, answer)
		}
	}
	if !strings.Contains(done.Tools, "ok") || done.Sources == 0 {
		t.Fatalf("tools %q and %d sources: want the search, ok, and its sources", done.Tools, done.Sources)
	}
	page.screenshot("aisdk-answer")

	// Reload mid-answer: useChat resumes the running turn from the
	// journal; the answer completes once, every state shown after the
	// reload is the start of the final answer, and the reload sent
	// nothing again.
	q2 := "Where is the security policy, and what does it say?"
	page.send(q2)
	before := answerTo(page, q2, "the second answer streams", func(m aiMessage) bool { return running(m) && m.Text != "" }, nil)
	if err := chromedp.Do(page.ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	page.waitRole("textbox", "Message")
	streamed = nil
	done = answerTo(page, q2, "the answer completes after the reload", func(m aiMessage) bool { return m.State == "COMPLETED" }, func(m aiMessage) {
		if running(m) && m.Text != "" {
			streamed = append(streamed, m.Text)
		}
	})
	if len(streamed) == 0 {
		t.Fatalf("the answer finished before the reloaded page showed it streaming (before: %q): nothing was proved", before.Text)
	}
	_, answer, _ = turnState(t, ctx, a, done.TurnID)
	for _, s := range streamed {
		if !strings.HasPrefix(answer, s) {
			t.Fatalf("after the reload the page showed %q, which is not how %q starts", s, answer)
		}
	}
	if done.Text != answer || done.TurnID != before.TurnID {
		t.Fatalf("after the reload the page ends with %q (turn %s); the server has %q (turn %s)", done.Text, done.TurnID, answer, before.TurnID)
	}
	ms, err := aiMessages(page)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, m := range ms {
		if m.TurnID == done.TurnID && m.Role == "assistant" {
			answers++
		}
	}
	if answers != 1 || acceptedCount(t, ctx, a, team, q2) != 1 {
		t.Fatalf("after the reload: %d answers on the page, %d turns on the server: want one of each", answers, acceptedCount(t, ctx, a, team, q2))
	}
	page.screenshot("aisdk-reloaded")

	// kill -9 of the replica serving the page mid-answer: the page's
	// stream resumes through the other replica and the answer completes
	// as the server has it (after a recovery, the new attempt's text).
	q3 := "When is the launch, and who decided it?"
	page.send(q3)
	answerTo(page, q3, "the third answer streams", func(m aiMessage) bool { return running(m) && len(m.Text) > 20 }, nil)
	f.killFirst()
	done = answerTo(page, q3, "the answer completes after the kill", func(m aiMessage) bool { return m.State == "COMPLETED" }, nil)
	state, answer, _ = turnState(t, ctx, a, done.TurnID)
	if state != "COMPLETED" || done.Current != answer {
		t.Fatalf("after kill -9 the page shows %q (attempt %d); the server has %s %q", done.Current, done.Attempt, state, answer)
	}
	if acceptedCount(t, ctx, a, team, q3) != 1 {
		t.Fatalf("the kill made another turn of %q", q3)
	}
	page.screenshot("aisdk-after-kill9")
	t.Logf("after kill -9 the answer completed on attempt %d", done.Attempt)

	// Stop: useChat's stop() cancels the turn; the server records it
	// cancelled by the member, and a reload shows it so.
	q4 := "What changed this week, in detail?"
	page.send(q4)
	stopped := answerTo(page, q4, "the fourth answer streams", func(m aiMessage) bool { return running(m) && m.Text != "" }, nil)
	page.click("button", "Stop")
	if err := browserPoll(ctx, "the server records the turn cancelled", 50*time.Millisecond, func() (bool, error) {
		state, _, reason := turnState(t, ctx, a, stopped.TurnID)
		if state == "COMPLETED" || state == "FAILED" {
			return false, fmt.Errorf("the turn ended %s", state)
		}
		return state == "CANCELLED" && reason == "CANCELLED_BY_MEMBER", nil
	}); err != nil {
		t.Fatal(err)
	}
	page.waitRole("button", "Send")
	if err := chromedp.Do(page.ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	page.waitRole("textbox", "Message")
	answerTo(page, q4, "the reloaded page shows the answer cancelled", func(m aiMessage) bool { return m.State == "CANCELLED" }, nil)
	page.screenshot("aisdk-stopped")
}
