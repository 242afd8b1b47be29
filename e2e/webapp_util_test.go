package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// byRole finds elements the way people and assistive technology do: by
// their computed accessible role and name (Chromium's accessibility
// tree), so a test that finds "the textbox named Message" fails when the
// page stops offering one.
func byRole(role, name string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, n *chromedp.Node) ([]cdp.NodeID, error) {
		res, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{NodeID: n.NodeID, AccessibleName: name, Role: role})
		if err != nil {
			return nil, err
		}
		var backend []cdp.BackendNodeID
		for _, ax := range res.Nodes {
			if !ax.Ignored && ax.BackendDOMNodeID != 0 {
				backend = append(backend, ax.BackendDOMNodeID)
			}
		}
		if len(backend) == 0 {
			return nil, nil
		}
		ids, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend, dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: backend})
		return ids.NodeIDs, err
	})
}

// chatPage is a tab of the chat web app.
type chatPage struct {
	t    *testing.T
	ctx  context.Context // the tab, with the test's deadline
	base string
	// graphqlPosts counts the page's POSTs to /graphql.
	graphqlPosts atomic.Int64
}

// openChat opens a new tab of b on the app at base+path.
func openChat(t *testing.T, b *browser, deadline context.Context, base, path string) *chatPage {
	t.Helper()
	tab, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	ctx, cancelDeadline := context.WithCancel(tab)
	stop := context.AfterFunc(deadline, cancelDeadline)
	t.Cleanup(func() { stop(); cancelDeadline() })
	p := &chatPage{t: t, ctx: ctx, base: base}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request.Method == "POST" && strings.HasSuffix(e.Request.URL, "/graphql") {
			p.graphqlPosts.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+path)); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	p.waitRole("textbox", "Message")
	return p
}

// waitRole waits until the page offers an element of role and name.
func (p *chatPage) waitRole(role, name string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.WaitVisible("", byRole(role, name))); err != nil {
		p.t.Fatalf("the page offers no %s named %q: %v", role, name, err)
	}
}

// click clicks the element of role and name.
func (p *chatPage) click(role, name string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click("", byRole(role, name))); err != nil {
		p.t.Fatalf("click the %s %q: %v", role, name, err)
	}
}

// fill types text into the textbox named name: a click to focus it, then
// the text as the keyboard would insert it. (chromedp's SendKeys reads a
// node's attributes unlocked while its event loop may change them: a data
// race under -race.)
func (p *chatPage) fill(name, text string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click("", byRole("textbox", name))); err != nil {
		p.t.Fatalf("focus %q: %v", name, err)
	}
	if _, err := chromedp.Call(p.ctx, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
		p.t.Fatalf("type into %q: %v", name, err)
	}
}

// send types text into the composer and presses Send.
func (p *chatPage) send(text string) {
	p.t.Helper()
	p.fill("Message", text)
	p.click("button", "Send")
}

// pageTurn is a turn as the transcript shows it.
type pageTurn struct {
	ID       string `json:"id"`
	Input    string `json:"input"`
	Answer   string `json:"answer"`
	Answered bool   `json:"answered"`
	Status   string `json:"status"`
	Sources  int    `json:"sources"`
	Tools    string `json:"tools"`
	Steers   string `json:"steers"`
	// Interrupted lists the attempts shown as interrupted, comma-separated.
	Interrupted string `json:"interrupted"`
}

// turns reads the transcript region's turns.
func (p *chatPage) turns() ([]pageTurn, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[[]pageTurn](`(() => {
  const region = document.querySelector('section[aria-label="Transcript"]');
  if (!region) return [];
  return [...region.querySelectorAll('article')].map((a) => ({
    id: a.dataset.turnId,
    input: a.querySelector('.message p')?.innerText ?? '',
    answer: a.querySelector('.answer')?.innerText ?? '',
    answered: a.querySelector('.answer')?.dataset.answered === 'true',
    status: a.querySelector('.turn-status')?.innerText ?? '',
    sources: a.querySelectorAll('.citations li').length,
    tools: a.querySelector('.tools')?.innerText ?? '',
    steers: a.querySelector('.steers')?.innerText ?? '',
    interrupted: [...a.querySelectorAll('.interrupted')].map((d) => d.dataset.attempt).join(','),
  }));
})()`))
}

// turnWith waits until the transcript holds a turn whose input is input
// and cond holds of it, and returns it.
func (p *chatPage) turnWith(input, what string, cond func(pageTurn) bool) pageTurn {
	p.t.Helper()
	var got pageTurn
	err := browserPoll(p.ctx, what, 25*time.Millisecond, func() (bool, error) {
		ts, err := p.turns()
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			if t.Input == input && cond(t) {
				got = t
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		ts, _ := p.turns()
		p.t.Fatalf("%v; transcript: %+v", err, ts)
	}
	return got
}

// connection is the text of the page's connection status.
func (p *chatPage) connection() (string, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('[aria-label="Connection"]')?.innerText ?? ''`))
}

// waitConnection waits until the connection status reads state.
func (p *chatPage) waitConnection(state string) {
	p.t.Helper()
	if err := browserPoll(p.ctx, "the connection is "+state, 25*time.Millisecond, func() (bool, error) {
		s, err := p.connection()
		return s == state, err
	}); err != nil {
		p.t.Fatal(err)
	}
}

// screenshot saves the page as name.png in the screenshots folder:
// TURNGATE_SCREENSHOTS, or turngate-screenshots under the temp folder.
func (p *chatPage) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv("TURNGATE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "turngate-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(dir, name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", file)
}

// streamedPrefix reports whether shown, an answer as it streamed, is
// the start of final, the answer it became: no text repeated or missing
// so far. A citation marker still arriving ("[doc:ab") is cut off first,
// since the page links a marker only once it is whole.
func streamedPrefix(shown, final string) bool {
	if i := strings.LastIndex(shown, "["); i >= 0 && !strings.Contains(shown[i:], "]") {
		shown = shown[:i]
	}
	return strings.HasPrefix(final, strings.TrimSpace(shown))
}

func describeTurns(ts []pageTurn) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "- %q → %q (%s)\n", t.Input, t.Answer, t.Status)
	}
	return b.String()
}
