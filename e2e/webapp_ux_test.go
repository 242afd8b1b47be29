package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// axeSource is axe-core's browser bundle, from the web app's
// devDependencies (make npm installs it).
func axeSource(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "web", "app", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is not installed (run make npm): %v", err)
	}
	return string(src)
}

// axeSerious runs axe-core on the page and returns its serious and
// critical violations, one line each.
func (p *chatPage) axeSerious(src string) []string {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](src+"\n;true")); err != nil {
		p.t.Fatalf("load axe-core: %v", err)
	}
	found, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`axe.run(document, { resultTypes: ['violations'] }).then((r) =>
  r.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => v.impact + ' ' + v.id + ': ' + v.help + ' at ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')))`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("run axe-core: %v", err)
	}
	return found
}

// emulate makes the tab width px wide and its preferred colour scheme scheme.
func (p *chatPage) emulate(width int64, scheme string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(width, 844)); err != nil {
		p.t.Fatal(err)
	}
	if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		p.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the tab.
func evalIn[T any](p *chatPage, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// TestChatAccessibleInEveryLayout: with a finished answer on screen the
// page has no serious or critical axe-core violation at 1280 and 390 px
// wide, in light and dark; at 390 px nothing scrolls sideways; dark mode
// follows prefers-color-scheme. The transcript is not a live region (a
// screen reader would read every token): one polite status announces the
// finished answer once. Screenshots of the four layouts are kept.
func TestChatAccessibleInEveryLayout(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 10 * time.Millisecond })
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	src := axeSource(t)
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")

	question := "When is the launch?"
	page.send(question)
	page.turnWith(question, "the answer is complete with its sources", func(t pageTurn) bool { return t.Answered && t.Sources > 0 })
	var said string
	if err := browserPoll(page.ctx, "the finished answer is announced", 25*time.Millisecond, func() (bool, error) {
		var err error
		said, err = chromedp.Run(page.ctx, chromedp.Evaluate[string](`document.querySelector('[role="status"][aria-label="Announcements"]')?.textContent ?? ''`))
		return strings.HasPrefix(said, "Assistant answered: You wrote"), err
	}); err != nil {
		t.Fatalf("%v: the announcement reads %q", err, said)
	}
	if live := evalIn[int](page, `document.querySelectorAll('section[aria-label="Transcript"][aria-live], section[aria-label="Transcript"] [aria-live], section[aria-label="Transcript"] [role="status"]').length`); live != 0 {
		t.Fatalf("%d live regions in the transcript: a screen reader would read every token", live)
	}

	var light string
	for _, width := range []int64{1280, 390} {
		for _, scheme := range []string{"light", "dark"} {
			page.emulate(width, scheme)
			bg := evalIn[string](page, `getComputedStyle(document.documentElement).backgroundColor`)
			switch {
			case scheme == "light":
				light = bg
			case bg == light:
				t.Fatalf("%d px: the page background is %s in dark mode too", width, bg)
			}
			if over := evalIn[int](page, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
				t.Errorf("%d px, %s: the page scrolls sideways by %d px", width, scheme, over)
			}
			if found := page.axeSerious(src); len(found) > 0 {
				t.Errorf("%d px, %s: axe-core finds:\n%s", width, scheme, strings.Join(found, "\n"))
			}
			page.screenshot("chat-" + scheme + "-" + map[int64]string{1280: "1280", 390: "390"}[width])
		}
	}
}

// TestChatFollowsTheAnswer: the transcript stays scrolled to its end
// while answers stream, and stops following once the reader scrolls up;
// answers carry an author label and the member's own messages say so;
// Regenerate submits the same input as a new turn; Esc stops the
// streaming turn as the Stop button does, and Retry runs it again.
func TestChatFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 20 * time.Millisecond })
	a := h.Client(t, alice)
	private := servertest.Rooms(t, a)["Alice's notes"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+private)
	page.emulate(1280, "light")
	if err := chromedp.Do(page.ctx, chromedp.EmulateViewport(1280, 480)); err != nil {
		t.Fatal(err)
	}
	page.waitConnection("Live")

	const gap = `(() => { const el = document.querySelector('section[aria-label="Transcript"]'); return el.scrollHeight - el.scrollTop - el.clientHeight; })()`
	const overflows = `(() => { const el = document.querySelector('section[aria-label="Transcript"]'); return el.scrollHeight > el.clientHeight + 50; })()`
	for i, q := range []string{"When is the launch?", "Where is the security policy?", "What does the security policy say about laptops?"} {
		page.send(q)
		page.turnWith(q, "the answer completes", func(t pageTurn) bool { return t.Answered })
		if i > 0 && evalIn[bool](page, overflows) {
			if g := evalIn[int](page, gap); g > 24 {
				t.Fatalf("after answer %d the transcript is %d px above its end: it did not follow the answer", i+1, g)
			}
		}
	}
	if !evalIn[bool](page, overflows) {
		t.Fatal("the transcript does not overflow: the test proves nothing about scrolling")
	}
	labels := evalIn[[]string](page, `(() => { const a = document.querySelector('section[aria-label="Transcript"] article'); return [a.querySelector('.message .author')?.innerText ?? '', a.querySelector('.answer-author')?.innerText ?? '']; })()`)
	if !strings.HasSuffix(labels[0], "(you)") || labels[1] != "Assistant" {
		t.Fatalf("author labels %q: want the member's name with (you), then Assistant", labels)
	}

	// The reader scrolls up: the next answer streams without pulling them down.
	evalIn[bool](page, `(() => { const el = document.querySelector('section[aria-label="Transcript"]'); el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); return true; })()`)
	q := "Tell me about the launch again?"
	page.send(q)
	page.turnWith(q, "the answer completes", func(t pageTurn) bool { return t.Answered })
	if top := evalIn[int](page, `document.querySelector('section[aria-label="Transcript"]').scrollTop`); top > 24 {
		t.Fatalf("the reader scrolled up, and the transcript moved to %d px", top)
	}

	// Regenerate: the same input again, as a new turn.
	first := "When is the launch?"
	evalIn[bool](page, `(() => { [...document.querySelectorAll('section[aria-label="Transcript"] article')].find((a) => a.querySelector('.message p')?.innerText === `+jsString(first)+`).querySelector('.turn-actions button').click(); return true; })()`)
	if err := browserPoll(page.ctx, "the regenerated turn completes", 25*time.Millisecond, func() (bool, error) {
		ts, err := page.turns()
		n := 0
		for _, t := range ts {
			if t.Input == first && t.Answered {
				n++
			}
		}
		return n == 2, err
	}); err != nil {
		t.Fatal(err)
	}

	stopped := "Write me a long answer I will stop with Esc?"
	page.send(stopped)
	page.turnWith(stopped, "the answer starts streaming", func(t pageTurn) bool { return t.Answer != "" && !t.Answered })
	if err := chromedp.Do(page.ctx, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	end := page.turnWith(stopped, "Esc stopped the turn", func(t pageTurn) bool { return t.Status == "Stopped." })
	if state, _ := serverAnswer(t, ctx, a, end.ID); state != "CANCELLED" {
		t.Fatalf("turn %s, want CANCELLED", state)
	}

	// Retry on the stopped turn: its input again, as a new turn that completes.
	evalIn[bool](page, `(() => { [...document.querySelectorAll('section[aria-label="Transcript"] article')].find((a) => a.dataset.turnId === `+jsString(end.ID)+`).querySelector('.turn-actions button').click(); return true; })()`)
	again := page.turnWith(stopped, "the retried turn completes", func(t pageTurn) bool { return t.ID != end.ID && t.Answered })
	if again.ID == end.ID {
		t.Fatal("Retry did not submit a new turn")
	}
}

// codeAnswer is model output with a fenced code block.
const codeAnswer = "Build it with:\n\n```sh\nmake npm\nmake web\n```\n\nThen run `make run`."

// TestChatCopiesACodeBlock: a code block in an answer renders as a block
// with a Copy button; the button puts exactly the code on the clipboard.
func TestChatCopiesACodeBlock(t *testing.T) {
	t.Parallel()
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		content, _ := json.Marshal(map[string]string{"role": "assistant", "content": codeAnswer})
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", content)
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer model.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: model.URL, APIKey: "sk-local", Model: "m"}
		c.AgentRoute = "openai"
	})
	a := h.Client(t, alice)
	private := servertest.Rooms(t, a)["Alice's notes"].ID
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+private)
	page.waitConnection("Live")
	question := "how do I build the web app?"
	page.send(question)
	page.turnWith(question, "the answer is complete", func(t pageTurn) bool { return t.Answered })
	// The test reads the clipboard through a stand-in: headless Chromium's
	// own clipboard needs a permission grant and focus.
	evalIn[bool](page, `(() => { Object.defineProperty(navigator, 'clipboard', { configurable: true, value: { writeText: async (t) => { window.copied = t; } } }); return true; })()`)
	page.click("button", "Copy code")
	var copied string
	if err := browserPoll(page.ctx, "the code is copied", 25*time.Millisecond, func() (bool, error) {
		var err error
		copied, err = chromedp.Run(page.ctx, chromedp.Evaluate[string](`String(window.copied ?? '')`))
		return copied != "", err
	}); err != nil {
		t.Fatal(err)
	}
	if copied != "make npm\nmake web\n" {
		t.Fatalf("copied %q, want the code block's text", copied)
	}
	if label := evalIn[string](page, `document.querySelector('.code-block .copy').innerText`); label != "Copied" {
		t.Fatalf("the button reads %q after copying, want Copied", label)
	}
	page.screenshot("chat-code-block")
}

// TestChatShowsCitationChipsWhileStreaming: while an answer streams its
// citation markers show as the numbered chips the final answer has, never
// as raw [doc:…] text, and each streamed view is how the final answer
// starts.
func TestChatShowsCitationChipsWhileStreaming(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 40 * time.Millisecond })
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")

	question := "When is the launch?"
	page.send(question)
	var streamed []string
	final := page.turnWith(question, "the answer completes", func(t pageTurn) bool {
		if !t.Answered && t.Answer != "" {
			streamed = append(streamed, t.Answer)
		}
		return t.Answered && t.Sources > 0
	})
	chip := false
	for _, s := range streamed {
		if strings.Contains(s, "doc:") {
			t.Fatalf("a raw citation marker while streaming: %q", s)
		}
		if !streamedPrefix(s, final.Answer) {
			t.Fatalf("streaming showed %q, which is not how %q starts", s, final.Answer)
		}
		chip = chip || strings.Contains(s, "[1]")
	}
	if !chip {
		t.Fatalf("no citation chip while streaming in %d views; final %q", len(streamed), final.Answer)
	}
}

// TestChatRenamesARoom: the owner renames a shared room in its header;
// the header, her room list and bob's list show the new title; bob, a
// member but not the owner, is offered no Rename and is FORBIDDEN by the
// API.
func TestChatRenamesARoom(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	a := h.Client(t, alice)
	bob := h.Client(t, "bob@example.com")
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")

	page.click("button", "Rename")
	page.waitRole("textbox", "New title")
	evalIn[bool](page, `(() => { document.querySelector('form[aria-label="Rename room"] input').select(); return true; })()`)
	if _, err := chromedp.Call(page.ctx, input.InsertText, input.InsertTextParams{Text: "Launch crew"}); err != nil {
		t.Fatal(err)
	}
	page.click("button", "Save")
	page.waitRole("heading", "Launch crew")
	page.waitRole("button", "Launch crew · shared, 2 members")
	if got := servertest.Rooms(t, bob); got["Launch crew"].ID != team {
		t.Fatalf("bob's rooms %v: want the new title", got)
	}

	var out struct{ RenameConversation struct{ Title string } }
	err := bob.Do(ctx, `mutation($in: RenameConversationInput!) { renameConversation(input: $in) { title } }`,
		map[string]any{"in": map[string]any{"conversationId": team, "title": "Bob's now"}}, &out)
	if code := gqlclient.CodeOf(err); code != "FORBIDDEN" {
		t.Fatalf("bob renaming alice's room: %v (%s), want FORBIDDEN", err, code)
	}
	err = a.Do(ctx, `mutation($in: RenameConversationInput!) { renameConversation(input: $in) { title } }`,
		map[string]any{"in": map[string]any{"conversationId": team, "title": "   "}}, &out)
	if code := gqlclient.CodeOf(err); code != "BAD_USER_INPUT" {
		t.Fatalf("a blank title: %v (%s), want BAD_USER_INPUT", err, code)
	}

	bobs := openChat(t, b, ctx, h.Base, "/")
	bobs.switchMember("bob@example.com")
	if err := chromedp.Do(bobs.ctx, chromedp.Navigate(h.Base+"/#room="+team), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	bobs.waitRole("heading", "Launch crew")
	if n := evalIn[int](bobs, `[...document.querySelectorAll('.room-header button')].filter((b) => b.innerText === 'Rename').length`); n != 0 {
		t.Fatal("bob, not the owner, is offered Rename")
	}
}
