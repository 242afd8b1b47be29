package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestExplorerStreamsATurnInABrowser drives the embedded GraphiQL explorer
// in headless Chromium the way a person follows the tour: open the page
// (dev mode: alice's envelope in the Headers tab, the tour document aimed at
// the Team room), press play, pick "Watch" from the operation menu, and
// watch a turn submitted meanwhile stream in over the page's SSE
// subscription.
//
// GraphiQL's result pane shows only the latest subscription result, so the
// pane proves the end of the turn (TURN_TERMINAL) reached the page, and the
// whole stream is read from the browser's network layer: every entry the
// page received, in order, nothing lost or repeated.
//
// Not parallel: a browser is heavy on a two-core runner, and sequential
// tests run before the parallel ones start.
func TestExplorerStreamsATurnInABrowser(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 10 * time.Millisecond })
	c := h.Client(t, alice)
	room, ok := servertest.Rooms(t, c)["Team room"]
	if !ok {
		t.Fatal("alice has no Team room")
	}

	b := newBrowser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	rec, err := recordSSE(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var pane string // the result pane as last read
	defer func() {
		// The screenshot is always taken (the browser is still open:
		// deferred calls run before cleanups), but only reported on failure.
		sctx, scancel := context.WithTimeout(b.ctx, 15*time.Second)
		defer scancel()
		shot := filepath.Join(t.TempDir(), "explorer.png")
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(shot, png, 0o644)
		}
		if !t.Failed() {
			t.Logf("explorer streamed the turn in %s", time.Since(start).Round(time.Millisecond))
			return
		}
		if err != nil {
			t.Logf("screenshot: %v", err)
		} else {
			t.Logf("screenshot: %s", shot)
		}
		if p, err := resultPane(sctx); err == nil {
			pane = p
		}
		t.Logf("result pane:\n%s", pane)
		t.Logf("page console:\n%s", rec.consoleLog())
		t.Logf("event stream as received:\n%s", rec.body())
		var out []string // minus the noise of a machine without D-Bus
		for _, l := range strings.Split(b.output.String(), "\n") {
			if l != "" && !strings.Contains(l, "dbus") {
				out = append(out, l)
			}
		}
		t.Logf("chromium output (tail):\n%s", strings.Join(out[max(0, len(out)-40):], "\n"))
	}()

	// 1. Open the explorer and wait until GraphiQL has parsed the tour
	// document (the execute button then offers a menu of its operations)
	// and the Headers editor holds the envelope.
	const execute = `button[aria-label^="Execute query"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(h.Base+"/graphiql/"),
		chromedp.WaitVisible(chromedp.CSS(execute+`[aria-haspopup="menu"]`)),
	); err != nil {
		t.Fatalf("explorer never became ready: %v", err)
	}
	if err := browserPoll(ctx, "the editors show the tour and the envelope", 100*time.Millisecond, func() (bool, error) {
		doc, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`section[aria-label="Operation Editor"] .view-lines`)))
		if err != nil {
			return false, err
		}
		hdrs, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`section[aria-label="Headers"] .graphiql-editor:not(.hidden) .view-lines`)))
		if err != nil {
			return false, err
		}
		doc = strings.ReplaceAll(doc, "\u00a0", " ")
		return strings.Contains(doc, "subscription Watch") && strings.Contains(doc, room.ID) &&
			strings.Contains(hdrs, h.Config.IdentityHeader), nil
	}); err != nil {
		t.Fatal(err)
	}

	// 2. Press play and pick "Watch": the button turns into "Stop" while
	// the subscription runs.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(execute)),
		chromedp.Click(`//*[@role="menu"]//*[@role="menuitem"][normalize-space(.)="Watch"]`),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label^="Stop query"]`)),
	); err != nil {
		t.Fatalf("starting Watch: %v", err)
	}
	if err := browserPoll(ctx, "the page's event stream is open", 50*time.Millisecond, rec.live); err != nil {
		t.Fatal(err)
	}
	// Watch replays from position 0; once the pane shows the room's head
	// the subscription is following the journal live.
	if room.Head > 0 {
		if err := browserPoll(ctx, fmt.Sprintf("the result pane shows the room's head (seq %d)", room.Head), 100*time.Millisecond, func() (bool, error) {
			p, err := resultPane(ctx)
			if err != nil {
				return false, err
			}
			pane = p
			e, ok := paneEntry(p)
			return ok && e.Seq >= room.Head, nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// 3. Submit a message as alice over HTTP while the page watches.
	text := "hello from the browser test"
	var sub struct {
		SubmitMessage struct {
			ID       string `json:"id"`
			Position int64  `json:"position"`
			State    string `json:"state"`
		} `json:"submitMessage"`
	}
	key := fmt.Sprintf("browser-%d", time.Now().UnixNano())
	if err := c.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room.ID, "t": text, "k": key}, &sub); err != nil {
		t.Fatal(err)
	}
	turnID, accepted := sub.SubmitMessage.ID, sub.SubmitMessage.Position
	if accepted <= room.Head {
		t.Fatalf("turn accepted at %d, not after the room's head %d", accepted, room.Head)
	}

	// 4. The result pane ends on the turn's TURN_TERMINAL, which can only
	// have reached the page through its live subscription.
	var final browserEntry
	seen := map[string]bool{} // kinds glimpsed in the pane, for the log
	if err := browserPoll(ctx, "the result pane shows the turn's TURN_TERMINAL", 50*time.Millisecond, func() (bool, error) {
		p, err := resultPane(ctx)
		if err != nil {
			return false, err
		}
		pane = p
		e, ok := paneEntry(p)
		if !ok || e.TurnID == nil || *e.TurnID != turnID {
			return false, nil
		}
		seen[e.Kind] = true
		final = e
		return e.Kind == "TURN_TERMINAL", nil
	}); err != nil {
		t.Fatal(err)
	}
	if final.Seq <= accepted {
		t.Fatalf("pane shows TURN_TERMINAL at %d, not after turn_accepted at %d", final.Seq, accepted)
	}
	t.Logf("kinds glimpsed in the result pane: %v", slices.Sorted(maps.Keys(seen)))

	// 5. Everything the page received on its event stream: the replay and
	// then the whole turn, at dense positions, ending with the terminal the
	// pane shows.
	var got []browserEntry
	if err := browserPoll(ctx, "the recorded stream holds the terminal", 50*time.Millisecond, func() (bool, error) {
		es, err := journalEvents(rec.body())
		got = es
		return err == nil && len(es) > 0 && es[len(es)-1].Seq >= final.Seq, err
	}); err != nil {
		t.Fatal(err)
	}
	if got[0].Seq > accepted {
		t.Fatalf("the page's stream starts at %d, after the turn's acceptance at %d", got[0].Seq, accepted)
	}
	for i, e := range got {
		if want := got[0].Seq + int64(i); e.Seq != want {
			t.Fatalf("the page received seq %d as entry %d, want %d (gap or duplicate)", e.Seq, i, want)
		}
	}
	if last := got[len(got)-1]; last.Seq != final.Seq || last.Kind != "TURN_TERMINAL" {
		t.Fatalf("the stream ends with %d %s, the pane shows %d %s", last.Seq, last.Kind, final.Seq, final.Kind)
	}
	var kinds []string
	var deltas, answer strings.Builder
	nDeltas := 0
	for _, e := range got {
		if e.TurnID == nil || *e.TurnID != turnID {
			continue
		}
		kinds = append(kinds, e.Kind)
		switch e.Kind {
		case "TURN_ACCEPTED":
			if e.Seq != accepted {
				t.Errorf("TURN_ACCEPTED at %d, the mutation said %d", e.Seq, accepted)
			}
			if e.Text == nil || *e.Text != text {
				t.Errorf("TURN_ACCEPTED carries %v, want the submitted text %q", e.Text, text)
			}
		case "ANSWER_DELTA":
			nDeltas++
			if e.Text != nil {
				deltas.WriteString(*e.Text)
			}
		case "TURN_ANSWER":
			if e.Text != nil {
				answer.WriteString(*e.Text)
			}
		}
	}
	for _, k := range []string{"TURN_ACCEPTED", "ANSWER_DELTA", "TURN_ANSWER", "TURN_TERMINAL"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the page never received %s for the turn; it got %v", k, kinds)
		}
	}
	if kinds[0] != "TURN_ACCEPTED" || kinds[len(kinds)-1] != "TURN_TERMINAL" {
		t.Errorf("turn entries in the order %v, want TURN_ACCEPTED first and TURN_TERMINAL last", kinds)
	}

	// 6. The stored turn completed with the answer the page streamed.
	var stored struct {
		Turn struct {
			State  string `json:"state"`
			Answer string `json:"answer"`
		} `json:"turn"`
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer } }`, map[string]any{"id": turnID}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Turn.State != "COMPLETED" {
		t.Errorf("turn state %s, want COMPLETED", stored.Turn.State)
	}
	if stored.Turn.Answer == "" || deltas.String() != stored.Turn.Answer || answer.String() != stored.Turn.Answer {
		t.Errorf("streamed deltas %q\nstreamed TURN_ANSWER %q\nstored answer %q", deltas.String(), answer.String(), stored.Turn.Answer)
	}
	t.Logf("the page received %d entries; the turn %s: %d answer deltas, TURN_TERMINAL at %d", len(got), turnID, nDeltas, final.Seq)
}
