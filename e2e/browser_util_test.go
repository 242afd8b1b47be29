package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser the explorer test drives. The test fails
// rather than skips without one: CI installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium not found: install it with `apt-get install -y --no-install-recommends chromium`")
	return ""
}

// browser is one test's tab, in a browser context of its own (a fresh
// profile: no cookies, storage or cache of another test), in the
// package's one headless Chromium.
type browser struct {
	ctx    context.Context // the tab's chromedp context (no deadline)
	output *browserOutput  // the browser process's stdout and stderr
}

// chromium is the package's one Chromium, started by the first test that
// needs it and stopped by TestMain (closeChromium).
var chromium struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab, which owns the process
	output *browserOutput
	stop   []context.CancelFunc
	err    error
}

// browserTabs bounds the tabs open at once: the browser tests run in
// parallel with the tier's other tests, and a tab is heavy on two cores.
const browserTabs = 2

// tabs holds one token per open tab.
var tabs = make(chan struct{}, browserTabs)

// newBrowser opens a tab in a new browser context of the package's
// Chromium (as root, hence --no-sandbox), starting it on first use; it
// waits while browserTabs tabs are open. hardLimit bounds the tab's
// whole life; the caller bounds its own actions with a shorter deadline
// derived from b.ctx.
func newBrowser(t *testing.T, hardLimit time.Duration) *browser {
	t.Helper()
	exe := chromiumPath(t)
	tabs <- struct{}{}
	t.Cleanup(func() { <-tabs })
	chromium.once.Do(func() {
		dir, err := os.MkdirTemp("", "turngate-e2e-chromium-")
		if err != nil {
			chromium.err = err
			return
		}
		out := &browserOutput{}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, no-first-run, disable-background-networking, disable-dev-shm-usage, disable-sync, …
			chromedp.ExecPath(exe),
			chromedp.NoSandbox,
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.UserDataDir(filepath.Join(dir, "chromium-profile")),
			chromedp.WindowSize(1400, 1000),
			chromedp.CombinedOutput(out),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelFirst := chromedp.NewContext(actx)
		chromium.ctx, chromium.output = bctx, out
		// Stopped last-in first-out: the first tab, the browser, its folder.
		chromium.stop = []context.CancelFunc{cancelFirst, cancelAlloc, func() { os.RemoveAll(dir) }}
		// The first Run starts the browser and binds it to bctx.
		if err := chromedp.Do(bctx); err != nil {
			chromium.err = fmt.Errorf("start %s: %v\n%s", exe, err, out.String())
		}
	})
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	limit, cancelLimit := context.WithTimeout(chromium.ctx, hardLimit)
	tctx, cancelTab := chromedp.NewContext(limit, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelLimit)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tctx); err != nil {
		t.Fatalf("open a tab: %v\n%s", err, chromium.output.String())
	}
	return &browser{ctx: tctx, output: chromium.output}
}

// closeChromium stops the package's Chromium, if a test started it.
func closeChromium() {
	for _, stop := range chromium.stop {
		stop()
	}
}

// browserOutput is an io.Writer safe for the allocator's copying goroutine.
type browserOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *browserOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *browserOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sseRecorder keeps the bytes of every text/event-stream response the page
// receives, exactly as the browser's network stack handed them to the page,
// plus the page's console errors and uncaught exceptions for diagnostics.
//
// The page reads its subscription with fetch streaming, so Network.dataReceived
// carries no data by default; Network.streamResourceContent switches it on for
// one request and returns what arrived before that.
type sseRecorder struct {
	mu      sync.Mutex
	streams map[network.RequestID]*sseStream
	order   []network.RequestID
	console []string
	pending chan network.RequestID
}

type sseStream struct {
	url      string
	status   int64
	enabled  bool   // streamResourceContent answered
	err      error  // streamResourceContent failed
	buffered []byte // what arrived before streaming was switched on
	streamed []byte // dataReceived payloads since
}

// recordSSE starts recording on b's tab. It stops when ctx ends.
func recordSSE(ctx context.Context, b *browser) (*sseRecorder, error) {
	r := &sseRecorder{streams: map[network.RequestID]*sseStream{}, pending: make(chan network.RequestID, 16)}
	err := chromedp.Listen(b.ctx, func(ev any) {
		// Runs on the tab's reader goroutine: no commands here, no blocking.
		r.mu.Lock()
		defer r.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventResponseReceived:
			if ev.Response == nil || !strings.HasPrefix(ev.Response.MimeType, "text/event-stream") {
				return
			}
			r.streams[ev.RequestID] = &sseStream{url: ev.Response.URL, status: ev.Response.Status}
			r.order = append(r.order, ev.RequestID)
			select {
			case r.pending <- ev.RequestID:
			default:
				r.streams[ev.RequestID].err = fmt.Errorf("too many event streams")
			}
		case *network.EventDataReceived:
			if s := r.streams[ev.RequestID]; s != nil && len(ev.Data) > 0 {
				s.streamed = append(s.streamed, ev.Data...)
			}
		case *cdpruntime.EventExceptionThrown:
			if d := ev.ExceptionDetails; d != nil {
				msg := d.Text
				if d.Exception != nil {
					msg += " " + d.Exception.Description
				}
				r.console = append(r.console, "exception: "+msg)
			}
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type != cdpruntime.ConsoleAPICalledTypeError && ev.Type != cdpruntime.ConsoleAPICalledTypeWarning {
				return
			}
			var parts []string
			for _, a := range ev.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, string(a.Value))
				}
			}
			r.console = append(r.console, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	})
	if err != nil {
		return nil, err
	}
	// Switch streaming on for each event stream, off the reader goroutine.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-r.pending:
				res, err := chromedp.Call(ctx, network.StreamResourceContent, network.StreamResourceContentParams{RequestID: id})
				r.mu.Lock()
				s := r.streams[id]
				s.enabled, s.err, s.buffered = err == nil, err, res.BufferedData
				r.mu.Unlock()
			}
		}
	}()
	return r, nil
}

// live reports whether exactly one event stream is open and recorded.
func (r *sseRecorder) live() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.streams {
		if s.err != nil {
			return false, fmt.Errorf("recording the event stream %s: %w", s.url, s.err)
		}
		if s.status != 200 {
			return false, fmt.Errorf("event stream %s answered %d", s.url, s.status)
		}
	}
	return len(r.streams) == 1 && r.streams[r.order[0]].enabled, nil
}

// body returns what the page received on its one event stream so far.
func (r *sseRecorder) body() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		return nil
	}
	s := r.streams[r.order[0]]
	return append(append([]byte(nil), s.buffered...), s.streamed...)
}

func (r *sseRecorder) consoleLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.console, "\n")
}

// browserEntry is one journal entry as the Watch subscription selects it.
type browserEntry struct {
	Seq    int64   `json:"seq"`
	Kind   string  `json:"kind"`
	Text   *string `json:"text"`
	TurnID *string `json:"turnId"`
}

// journalEvents parses gqlgen's SSE framing (`event: next` / `data: …`,
// `event: complete`, `:` comments) into the journal entries it carries.
func journalEvents(body []byte) ([]browserEntry, error) {
	var out []browserEntry
	var event string
	var data []string
	flush := func() error {
		defer func() { event, data = "", nil }()
		if event != "next" || len(data) == 0 {
			return nil
		}
		var r struct {
			Data struct {
				Journal *browserEntry `json:"journal"`
			} `json:"data"`
			Errors json.RawMessage `json:"errors"`
		}
		if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &r); err != nil {
			return fmt.Errorf("event data %q: %w", strings.Join(data, "\n"), err)
		}
		if (len(r.Errors) > 0 && string(r.Errors) != "null") || r.Data.Journal == nil {
			return fmt.Errorf("subscription result without an entry: %s", strings.Join(data, "\n"))
		}
		out = append(out, *r.Data.Journal)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if err := flush(); err != nil {
				return out, err
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	// An incomplete trailing event (no blank line yet) is not counted.
	return out, sc.Err()
}

// resultPane is the text GraphiQL's result pane shows, with Monaco's
// non-breaking spaces turned back into spaces. The pane renders only the
// lines in view; one journal entry fits easily.
func resultPane(ctx context.Context) (string, error) {
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`section[aria-label="Result Window"] .view-lines`)))
	return strings.ReplaceAll(s, "\u00a0", " "), err
}

var (
	paneSeq  = regexp.MustCompile(`"seq":\s*(\d+)`)
	paneKind = regexp.MustCompile(`"kind":\s*"([A-Z_]+)"`)
	paneTurn = regexp.MustCompile(`"turnId":\s*"([^"]+)"`)
)

// paneEntry reads the journal entry the result pane shows (GraphiQL shows
// the latest subscription result only); ok is false while it shows none.
func paneEntry(text string) (e browserEntry, ok bool) {
	m := paneSeq.FindStringSubmatch(text)
	k := paneKind.FindStringSubmatch(text)
	if m == nil || k == nil {
		return e, false
	}
	e.Seq, _ = strconv.ParseInt(m[1], 10, 64)
	e.Kind = k[1]
	if tm := paneTurn.FindStringSubmatch(text); tm != nil {
		e.TurnID = &tm[1]
	}
	return e, true
}

// browserPoll polls cond every interval until it reports true, fails, or ctx
// ends; what names the condition in the error.
func browserPoll(ctx context.Context, what string, interval time.Duration, cond func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting until %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}
