package turn

import (
	"strings"
	"sync"
	"time"
)

// coalescer gathers streamed tokens into bounded answer_delta writes: one
// write per window of time or count of tokens, whichever comes first.
type coalescer struct {
	window time.Duration
	max    int
	write  func(text string, offset int) error

	mu     sync.Mutex
	buf    strings.Builder
	n      int
	offset int
	timer  *time.Timer
	err    error
	closed bool

	flushMu sync.Mutex
}

func newCoalescer(window time.Duration, max, offset int, write func(string, int) error) *coalescer {
	return &coalescer{window: window, max: max, offset: offset, write: write}
}

func (c *coalescer) add(text string) {
	c.mu.Lock()
	if c.err != nil || c.closed {
		c.mu.Unlock()
		return
	}
	c.buf.WriteString(text)
	c.n++
	if c.n == 1 {
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
	text, offset := c.buf.String(), c.offset
	c.buf.Reset()
	c.n = 0
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
	text := c.buf.String()
	c.buf.Reset()
	c.n = 0
	return text, c.offset, c.err
}
