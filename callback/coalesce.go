package callback

import (
	"strings"
	"sync"
	"time"
)

// coalescer gathers streamed tokens into bounded answer_delta writes: one
// write per window of time or count of tokens, whichever comes first. Each
// write passes through transform (redaction) and ends at a whitespace: the
// word still being streamed waits for the next write, so a pattern that
// contains no whitespace (an email, a key) is never split across two
// writes and is seen whole by transform. Offsets count transformed text.
type coalescer struct {
	window    time.Duration
	max       int
	write     func(text string, offset int) error
	transform func(string) string

	mu     sync.Mutex
	buf    strings.Builder
	n      int
	offset int
	timer  *time.Timer
	err    error
	closed bool

	flushMu sync.Mutex
}

// maxUnbroken is how much text without whitespace waits for a word's end.
const maxUnbroken = 256

func newCoalescer(window time.Duration, max, offset int, transform func(string) string, write func(string, int) error) *coalescer {
	if transform == nil {
		transform = func(s string) string { return s }
	}
	return &coalescer{window: window, max: max, offset: offset, transform: transform, write: write}
}

func (c *coalescer) add(text string) {
	c.mu.Lock()
	if c.err != nil || c.closed {
		c.mu.Unlock()
		return
	}
	c.buf.WriteString(text)
	c.n++
	if c.timer == nil {
		c.timer = time.AfterFunc(c.window, c.flush)
	}
	full := c.n >= c.max
	c.mu.Unlock()
	if full {
		c.flush()
	}
}

func (c *coalescer) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	all := c.buf.String()
	// Cut after the last whitespace; the rest waits for the next write.
	cut := strings.LastIndexAny(all, " \n\t") + 1
	if cut == 0 && len(all) > maxUnbroken {
		cut = len(all) // text without spaces (e.g. CJK) still streams
	}
	text := c.transform(all[:cut])
	offset := c.offset
	c.buf.Reset()
	c.buf.WriteString(all[cut:])
	c.n = 0
	if cut < len(all) {
		c.n = 1
	}
	c.offset += len(text)
	failed := c.err != nil || c.closed
	c.mu.Unlock()
	if text == "" || failed {
		return
	}
	if err := c.write(text, offset); err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
}

// hold ends the coalescer without writing what is left: it returns that
// text and its offset, and the first write failure. Nothing is written
// after it returns.
func (c *coalescer) hold() (string, int, error) {
	c.flushMu.Lock() // wait for a flush in progress
	defer c.flushMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.closed = true
	text := c.transform(c.buf.String())
	c.buf.Reset()
	c.n = 0
	return text, c.offset, c.err
}
